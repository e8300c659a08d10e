"""The reference's RuleTaker and WebShop ids are registered and fail at make saying what they need."""

from __future__ import annotations

import pytest

import gem
from gem.errors import DataUnavailableError

RULETAKER = [f"logic:RuleTaker-d{d}" for d in (0, 1, 2, 3, 5)]
WEBSHOP = [f"webshop:{s}-{m}" for s in ("train", "test") for m in ("html", "text", "text_rich")]


def test_registered():
    assert set(RULETAKER + WEBSHOP) <= set(gem.list_envs())


@pytest.mark.parametrize("env_id", RULETAKER)
def test_ruletaker_says_how_to_supply_the_data(env_id):
    with pytest.raises(DataUnavailableError) as caught:
        gem.make(env_id)
    message = str(caught.value)
    assert f"axon-rl/RuleTaker-d{env_id[-1]}-70k" in message and "source=" in message


def test_ruletaker_runs_from_a_local_copy(tmp_path):
    path = tmp_path / "rt.jsonl"
    path.write_text('{"question": "Bob is big. Is Bob big?", "answer": "True"}\n')
    env = gem.make("logic:RuleTaker-d0", source=str(path))
    env.reset(seed=0)
    assert env.step("\\boxed{True}")[1] == 1.0


@pytest.mark.parametrize("env_id", WEBSHOP)
def test_webshop_says_what_it_needs(env_id):
    with pytest.raises(DataUnavailableError, match="WebShop"):
        gem.make(env_id)
