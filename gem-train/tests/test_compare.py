"""The comparison command: warm starts shared by the algorithms, finished runs skipped, figure and table."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gem_train.compare import CompareConfig, main, parse, plan

TESTS = Path(__file__).parent
TOY = ["env=custom", "env.id=toy:Guess-v0", "env.entry_point=toy_env:ToyGuess", "env.demonstrator=toy_env:Bisect"]


def test_parse_names_a_bad_key():
    assert parse(["seeds=[3,4]", "jobs=1"]).seeds == [3, 4]
    with pytest.raises(SystemExit, match="seedz"):
        parse(["seedz=[1]"])
    with pytest.raises(SystemExit, match="jobs must be >= 1"):
        parse(["jobs=0"])


def test_plan_starts_every_algorithm_from_its_seeds_warm_start(tmp_path):
    cfg = CompareConfig(experiments=["a", "b"], algos=["rebn", "ppo"], seeds=[0, 1], out=str(tmp_path))
    warm, runs = plan(cfg)
    assert len(warm) == 4 and len(runs) == 8
    for job in runs:
        start = tmp_path / job.experiment / "sft" / f"seed{job.seed}" / "checkpoints" / "iter_000000"
        assert f"model.path={start}" in job.args and "trainer.sft.episodes=0" in job.args
        assert f"algo={job.algo}" in job.args and f"trainer.seed={job.seed}" in job.args
    assert all("trainer.iterations=0" in job.args for job in warm)


def test_compare_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    out = tmp_path / "cmp"
    overrides = ",".join([*TOY, "trainer.iterations=2", "trainer.eval_every=1", "trainer.eval_episodes=4"])
    args = ["experiments=[smoke]", "algos=[rebn,grpo]", "seeds=[0]", "jobs=2", f"out={out}",
            f"overrides=[{overrides}]", f"figure_copy={tmp_path / 'docs' / 'fig.png'}"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "3 runs to do" not in first  # the warm start runs first, then the two algorithms
    assert "1 runs to do" in first and "2 runs to do" in first
    assert (out / "compare.png").stat().st_size > 0 and (tmp_path / "docs" / "fig.png").exists()
    table = (out / "compare.md").read_text()
    assert "| `toy:Guess-v0` |" in table and "ReBN" in table and "GRPO" in table
    results = json.loads((out / "compare.json").read_text())["results"]["smoke"]
    rebn, grpo = results["rebn"]["seeds"]["0"], results["grpo"]["seeds"]["0"]
    assert rebn["iterations"] == grpo["iterations"] == [0, 1, 2]
    # both start from the one warm start: the same model on the same held-out seeds
    assert rebn["eval_return"][0] == grpo["eval_return"][0]
    # a second call finds every run done and only redraws
    assert main(args) == 0
    assert "runs to do" not in capsys.readouterr().out
