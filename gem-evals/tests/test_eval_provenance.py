"""Provenance (issue 37): every gem eval record carries the env's fingerprint, a folder of another version of an
env is not resumed, and ``gem replay`` re-steps a run's episodes, reproducing them exactly or naming the first
that differ."""

from __future__ import annotations

import json

import pytest

from gem.cli import main as gem_main
from gem.errors import GemError
from gem.fingerprint import env_fingerprint
from gem.registration import make
from gem.testing.envs import CountEnv
from gem.wrappers import apply_wrappers
from gem_evals import evaluate
from gem_evals.testing_server import ScriptedServer


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


def _config(server, tmp_path, **kw):
    from test_eval_scripted import config

    return config(server, tmp_path, **kw)


class Generous(CountEnv):
    """CountEnv changed as an env author might by mistake: a wrong guess close to the target earns half."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if reward == 0 and "higher" in str(obs):
            reward = 0.5
        return obs, reward, terminated, truncated, info


def _change_the_env(registry) -> None:
    """The env as a new version of the suite would register it (the same id, another class)."""
    import dataclasses

    registry._specs["test:Count-v0"] = dataclasses.replace(registry.spec("test:Count-v0"), entry_point=Generous)


def test_every_record_and_the_run_carry_the_envs_fingerprint(count_registry, server, tmp_path):
    result = evaluate(_config(server, tmp_path, episodes=4))
    expected = env_fingerprint(apply_wrappers(make("test:Count-v0", max_turns=3), "messages"))
    assert expected != env_fingerprint(apply_wrappers(make("test:Count-v0", max_turns=4), "messages"))
    records = [json.loads(line) for line in (result.output / "episodes.jsonl").read_text().splitlines()]
    assert {r["fingerprint"] for r in records} == {expected}
    assert json.loads((result.output / "run.json").read_text())["fingerprints"] == {"test:Count-v0": expected}


def test_a_folder_of_another_version_of_the_env_is_not_resumed(count_registry, server, tmp_path):
    evaluate(_config(server, tmp_path, episodes=2))
    _change_the_env(count_registry)
    with pytest.raises(GemError, match="another version of the env.*--overwrite"):
        evaluate(_config(server, tmp_path, episodes=3))
    assert evaluate(_config(server, tmp_path, episodes=3, overwrite=True)).ran == 3


def test_replay_reproduces_a_run_and_catches_a_changed_env(count_registry, server, tmp_path, capsys):
    result = evaluate(_config(server, tmp_path, episodes=12, model="random"))
    path = str(result.output / "episodes.jsonl")
    assert gem_main(["replay", path]) == 0
    out = capsys.readouterr().out
    assert "test:Count-v0: 12/12 episodes reproduce their rewards; fingerprint as recorded" in out
    _change_the_env(count_registry)
    assert gem_main(["replay", path]) == 1
    out = capsys.readouterr().out
    assert "the env's fingerprint changed" in out and "differs: episode" in out and "recorded, 0.5 now" in out


def test_replay_of_a_file_without_records_is_one_line(count_registry, tmp_path, capsys):
    bad = tmp_path / "x.jsonl"
    bad.write_text("not json\n")
    assert gem_main(["replay", str(bad)]) == 1
    assert "holds no episode records" in capsys.readouterr().err
