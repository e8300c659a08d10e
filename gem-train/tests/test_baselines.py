"""The baselines suite: 24 presets spanning every family, each composing at both scales, and the runner that
plays them (``python -m gem_train.baselines``, ``nox -s baselines``) once end to end on one preset."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest
from hydra import compose, initialize_config_module

from gem_train.baselines import parse, plan, presets, table
from gem_train.cli import to_train_config

PRESETS = presets()


def test_24_baselines_span_every_family():
    families = Counter(PRESETS.values())
    assert len(PRESETS) == 24
    assert families["game"] >= 8 and families["reasoning-gym"] >= 5
    assert {"math", "code", "qa", "multi-agent", "terminal"} <= set(families)


def _compose(name: str, *overrides: str):
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        return to_train_config(compose("config", overrides=[f"experiment=baselines/{name}", *overrides]))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_baseline_composes_at_both_scales(name):
    tiny = _compose(name)
    assert tiny.model.name == "tiny" and tiny.rollout.engine == "hf" and tiny.trainer.sft.episodes > 0
    assert tiny.experiment.name == f"baselines_{name}"
    paper = _compose(name, "scale=paper", "model.path=/models/paper")
    assert paper.model.name == "hf" and paper.rollout.engine == "vllm_async" and paper.trainer.device == "cuda"
    assert paper.rollout.carry_over  # continuous batching across iterations (issue 35)
    assert paper.model.hub_name in ("Qwen/Qwen3-1.7B-Base", "Qwen/Qwen3-4B-Base")
    assert (paper.rollout.max_tokens, paper.trainer.lr, paper.trainer.sft.episodes) == (4096, 1e-6, 0)
    assert paper.env == tiny.env and paper.algo.gamma == tiny.algo.gamma  # the same env and discount


def test_a_preset_sets_its_own_tiny_budget_which_the_paper_scale_ignores_and_the_command_line_overrides():
    hanoi, sudoku = _compose("tower_of_hanoi"), _compose("sudoku")
    assert (hanoi.trainer.sft.lr, sudoku.trainer.sft.lr) == (3e-3, 1e-2)  # its own; the tiny scale's default
    assert hanoi.trainer.iterations == sudoku.trainer.iterations == 20
    assert _compose("tower_of_hanoi", "trainer.sft.lr=5e-3").trainer.sft.lr == 5e-3
    assert _compose("sudoku", "tiny_scale.iterations=7").trainer.iterations == 7
    paper = _compose("tower_of_hanoi", "scale=paper", "model.path=/models/paper", "tiny_scale.iterations=7")
    assert (paper.trainer.iterations, paper.trainer.sft.episodes) == (500, 0)


def test_the_tool_variants_train_behind_a_tool_on_demonstrations_that_call_it():
    tool_variants = {name for name in PRESETS if _compose(name).env.demonstrator == "tool_answer"}
    assert tool_variants == {"math_arithmetic_python", "qa_triviaqa_search"}
    assert "python_tool" in _compose("math_arithmetic_python").env.wrappers
    assert _compose("math_arithmetic").env.id == _compose("math_arithmetic_python").env.id  # with and without
    assert _compose("qa_triviaqa").env.id == "eval:TriviaQA"  # the same questions as qa:TriviaQA-search


def test_a_wrong_baseline_name_says_what_exists():
    with pytest.raises(SystemExit, match="no baseline preset nope; known: .*sudoku"):
        plan(parse(["baselines=[nope]"]))


def test_the_runner_plays_a_baseline_writes_its_row_and_does_not_run_it_twice(tmp_path):
    out = tmp_path / "baselines"
    command = [sys.executable, "-m", "gem_train.baselines", "baselines=[math_arithmetic]", "jobs=1", f"out={out}",
               "overrides=[trainer.iterations=2,trainer.eval_every=2,trainer.eval_episodes=4,trainer.sft.episodes=8,"
               "trainer.sft.epochs=1,rollout.episodes_per_iter=4,model.tiny.corpus_episodes=4]"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    row = next(line for line in (out / "baselines.md").read_text().splitlines() if line.startswith("| math_"))
    assert "`math:Arithmetic-v0-easy` | math |" in row and " → " in row
    results = json.loads((out / "baselines.json").read_text())["results"]["math_arithmetic"]
    assert results["iterations"] == [0, 2] and results["episodes_per_s"] > 0
    assert (out / "baselines.png").stat().st_size > 0
    from importlib.metadata import version
    assert "torch " + version("torch") in (out / "baselines.md").read_text().splitlines()[-1]  # where it ran
    assert results["environment"]["packages"]["torch"] == version("torch")
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "runs to do" not in again.stdout
    assert table({}) .count("\n") == 1  # the header alone when nothing finished
    # issue 34, point 4: one preset's figure is readable at its saved size (it was 319 x 253 px, title cut off)
    png = (out / "baselines.png").read_bytes()
    assert int.from_bytes(png[16:20], "big") >= 700
    assert "started (" in first.stdout  # a run says when it starts, and (every 30 s) where it is

    # a failing preset: its reason on screen, no matplotlib warning, and the earlier row stays in the table
    (out / "sudoku").mkdir()
    (out / "sudoku" / "metrics.jsonl").mkdir()  # gem-train cannot write its metrics there
    failing = [*command[:3], "baselines=[sudoku]", *command[4:]]
    failed = subprocess.run(failing, capture_output=True, text=True, timeout=600)
    assert failed.returncode == 1
    line = next(line for line in failed.stdout.splitlines() if line.strip().startswith("sudoku") and "FAILED" in line)
    assert "IsADirectoryError" in line and "console.log" in line
    assert "Warning" not in failed.stderr
    assert any(line.startswith("| math_arithmetic |") for line in (out / "baselines.md").read_text().splitlines())


def test_progress_reads_where_a_run_is(tmp_path):
    from gem_train.compare import Job, progress

    job = Job("x", "rebn", 0, tmp_path, ["experiment=baselines/sudoku", "trainer.iterations=7"])
    assert progress(job).startswith("starting")
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"kind": "sft", "epoch": 2, "epochs": 8}) + "\n")
    assert progress(job) == "warm start, epoch 2/8"
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"kind": "eval", "iteration": 0}) + "\n" + json.dumps({"kind": "train", "iteration": 3})
                + "\n")
    assert progress(job) == "iteration 3/7"


def test_the_paper_mode_gives_each_baseline_its_own_model(tmp_path):
    """scale=paper: every preset at the paper scale with the model its hub_name names, under models=; a missing
    model stops the plan before any run starts (issue 35, point 7)."""
    from gem_train.baselines import BaselinesConfig, plan

    models = tmp_path / "models"
    cfg = BaselinesConfig(baselines=["sudoku", "qa_triviaqa"], out=str(tmp_path / "out"), scale="paper",
                          models=str(models))
    with pytest.raises(SystemExit, match="no model at"):
        plan(cfg)
    for name in ("Qwen3-1.7B-Base", "Qwen3-4B-Base"):
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text("{}")
    sudoku, qa = plan(cfg)
    assert "scale=paper" in sudoku.args and f"model.path={models / 'Qwen3-1.7B-Base'}" in sudoku.args
    assert "trainer.keep_checkpoints=1" in sudoku.args  # a job needs its last checkpoint alone
    assert f"model.path={models / 'Qwen3-4B-Base'}" in qa.args


def test_a_baselines_run_that_trains_nothing_exits_non_zero(tmp_path, capsys):
    """Issue 35, point 7: a run that finished without one update (trainer.iterations=0) was a row of start
    figures and exit 0, so a paper-mode invocation that trained nothing looked like a result; a folder where no
    baseline finished (no row) exits 1 too."""
    from gem_train.baselines import main

    args = ["baselines=[math_arithmetic]", "jobs=1", f"out={tmp_path / 'b'}",
            "overrides=[trainer.iterations=0,trainer.eval_episodes=4,trainer.sft.episodes=8,trainer.sft.epochs=1,"
            "model.tiny.corpus_episodes=4]"]
    assert main(args) == 1
    assert "trained nothing (no update): math_arithmetic" in capsys.readouterr().err
    assert main(["baselines=[sudoku]", "jobs=1", f"out={tmp_path / 'c'}",
                 "overrides=[trainer.iterations=0,experiment.output_dir=/proc/none]"]) == 1
    assert "no baseline has finished" in capsys.readouterr().err
