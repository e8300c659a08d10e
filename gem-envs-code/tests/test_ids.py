"""check_env for every offline id."""

import pytest

import gem
from gem.testing import check_env
from gem_envs_code.plugin import HUB_IDS, OFFLINE_IDS


def test_every_reference_id_is_registered() -> None:
    registered = set(gem.list_envs("code:*")) | set(gem.list_envs("eval:*"))
    assert set(HUB_IDS) | set(OFFLINE_IDS) <= registered


@pytest.mark.parametrize("env_id", sorted(OFFLINE_IDS))
def test_check_env(env_id: str) -> None:
    # a short per-test timeout: check_env's adversarial actions include an infinite loop
    env = gem.make(env_id, test_timeout=1.0)
    check_env(env, num_random_strings=50)
    env.close()
