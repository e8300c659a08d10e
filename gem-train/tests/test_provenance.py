"""gem-train's records carry each env's fingerprint (issue 37): every metrics record, the run folder's
environment.jsonl and the checkpoints."""

from __future__ import annotations

import json

from test_train import smoke_config

from gem.fingerprint import env_fingerprint
from gem_train.metrics_log import read_metrics
from gem_train.trainer import train


def test_metrics_environment_and_checkpoints_carry_the_env_fingerprint(tmp_path, gem_registry):
    out = tmp_path / "run"
    train(smoke_config(out, "trainer.sft.episodes=0"))
    records = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] in ("train", "eval")]
    prints = {r["env_fingerprint"] for r in records}
    assert len(prints) == 1 and len(next(iter(prints))) == 16
    [fingerprint] = prints
    environment = json.loads((out / "environment.jsonl").read_text().splitlines()[-1])
    assert environment["env_fingerprints"] == {"toy:Guess-v0": fingerprint}
    state = json.loads(next((out / "checkpoints").glob("*/trainer_state.json")).read_text())
    assert state["env_fingerprints"] == {"toy:Guess-v0": fingerprint}
    import toy_env

    assert fingerprint != env_fingerprint(toy_env.ToyGuess(high=5))  # another env gives another


def test_gem_replay_reproduces_a_runs_evaluation_episodes(tmp_path, gem_registry, capsys):
    """The evaluation episodes go to eval_episodes.jsonl as gem replay reads them; replayed, they reproduce."""
    from gem.cli import main as gem_main

    out = tmp_path / "run"
    train(smoke_config(out, "trainer.sft.episodes=0"))
    lines = (out / "eval_episodes.jsonl").read_text().splitlines()
    assert {json.loads(line)["iteration"] for line in lines} == {0, 2}  # smoke's two evaluations
    assert gem_main(["replay", str(out / "eval_episodes.jsonl")]) == 0
    out = capsys.readouterr().out
    assert f"toy:Guess-v0: {len(lines)}/{len(lines)} episodes reproduce their rewards; fingerprint as recorded" in out
