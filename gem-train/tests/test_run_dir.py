"""The run folder through the real ``gem-train`` script: a resumed run must have the config of the run it continues,
a bad config stops before Hydra makes a folder, and the console lines reach ``gem-train.log`` too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gem_train.metrics_log import read_metrics

TESTS = Path(__file__).parent
TOY = ["env=custom", "env.id=toy:Guess-v0", "env.entry_point=toy_env:ToyGuess", "env.demonstrator=toy_env:Bisect"]
SMALL = ["experiment=smoke", *TOY, "trainer.iterations=1", "trainer.eval_every=1", "trainer.sft.episodes=4",
         "trainer.tensorboard=false"]


def gem_train(*args: str, cwd: Path, prelude: str = "") -> subprocess.CompletedProcess:
    """``gem-train args`` in a subprocess; ``prelude`` is Python run first in that process."""
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if prelude:
        command = [sys.executable, "-c", f"{prelude}\nimport sys\nfrom gem_train.cli import main\n"
                                         "sys.argv[0] = 'gem-train'\nmain()", *args]
    else:
        command = [str(Path(sys.executable).parent / "gem-train"), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A one-iteration run of the toy env, with a checkpoint at iteration 1."""
    out = tmp_path_factory.mktemp("finished") / "run"
    done = gem_train(*SMALL, f"experiment.output_dir={out}", cwd=out.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def copy_of(run: Path, tmp_path: Path) -> Path:
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run"


def test_resuming_with_another_env_is_refused_naming_env_id(finished_run, tmp_path):
    out = copy_of(finished_run[0], tmp_path)
    recorded = (out / "hydra" / "config.yaml").read_text()
    done = gem_train(*SMALL, "env.id=toy:Chatter-v0", "env.entry_point=toy_env:Chatter",
                     f"experiment.output_dir={out}", cwd=tmp_path)
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert "env.id: 'toy:Guess-v0' there, 'toy:Chatter-v0' now" in line
    assert "env.entry_point" in line and "trainer.resume=false" in line and "another experiment.output_dir" in line
    assert done.stdout == ""
    # nothing of the old run was touched: Hydra's record of its config, its metrics, its checkpoints
    assert (out / "hydra" / "config.yaml").read_text() == recorded
    assert [r["kind"] for r in read_metrics(out / "metrics.jsonl")] == ["sft", "eval", "train", "eval"]


def test_resuming_with_the_same_config_says_so_and_continues(finished_run, tmp_path):
    out = copy_of(finished_run[0], tmp_path)
    # more iterations and other logging options are no change of the run
    done = gem_train(*SMALL, "trainer.iterations=2", "experiment.name=longer", f"experiment.output_dir={out}",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"resuming from {out / 'checkpoints' / 'iter_000001'} at iteration 1"
    # then what loading took (trainer.setup_line), then training
    setup = [line for line in lines[1:] if line.startswith("[setup]")]
    assert [line[:17] for line in setup] == ["[setup] tiny mode", "[setup] learner's", "[setup] sampler ("]
    assert lines[1:4] == setup
    assert [line[:13] for line in lines[4:6]] == ["[train] | it ", "[eval] | it  "]
    assert [(r["kind"], r.get("iteration")) for r in read_metrics(out / "metrics.jsonl")] == [
        ("sft", None), ("eval", 0), ("train", 1), ("eval", 1), ("train", 2), ("eval", 2)]
    # each start records where it ran: the first at iteration 0, the resumed one at 1
    starts = [json.loads(line) for line in (out / "environment.jsonl").read_text().splitlines()]
    assert [s["iteration"] for s in starts] == [0, 1]
    from importlib.metadata import version
    assert starts[1]["packages"]["torch"] == version("torch") and "gem-train" in starts[1]["packages"]
    assert starts[1]["python"] and starts[1]["cpus"] >= 1


def test_rerunning_a_finished_run_says_so_in_one_line_and_trains_nothing(finished_run, tmp_path):
    """Issue 34, point 4: a rerun of the main job printed "resuming from ... at iteration 25" and the old table,
    trained nothing, and said nothing of how to start over."""
    out = copy_of(finished_run[0], tmp_path)
    metrics = (out / "metrics.jsonl").read_text()
    done = gem_train(*SMALL, f"experiment.output_dir={out}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stdout.splitlines()[0]
    assert first == (f"{out} holds a finished run (1 of 1 iterations): nothing to train. To start over: "
                     "trainer.resume=false (or another experiment.output_dir=...); to train on: trainer.iterations=2")
    assert "resuming" not in done.stdout and "[train]" not in done.stdout
    assert (out / "metrics.jsonl").read_text() == metrics


def test_starting_over_with_resume_false_replaces_the_old_run(finished_run, tmp_path):
    out = copy_of(finished_run[0], tmp_path)
    done = gem_train(*SMALL, "env.id=toy:Chatter-v0", "env.entry_point=toy_env:Chatter", "trainer.sft.episodes=0",
                     "trainer.resume=false", f"experiment.output_dir={out}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming" not in done.stdout
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["iter_000001"]
    assert [json.loads(line)["iteration"] for line in (out / "environment.jsonl").read_text().splitlines()] == [0]
    # the tiny model and its tokenizer were built again, on Chatter's text
    tokenizer = "model_init/tokenizer.json"
    assert (out / tokenizer).read_text() != (finished_run[0] / tokenizer).read_text()


def test_unknown_env_id_is_one_line_and_leaves_no_folder(tmp_path):
    done = gem_train("env.id=nope", cwd=tmp_path)
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert line.startswith("gem-train: bad config: env.id: No env 'nope'.") and "`gem list` shows every id" in line
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no runs/guess_the_number/ with Hydra's files


def test_wandb_asked_for_but_missing_is_one_line_before_any_work(tmp_path):
    done = gem_train(*SMALL, "trainer.wandb=true", cwd=tmp_path, prelude="import sys\nsys.modules['wandb'] = None")
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert line.startswith("gem-train: bad config: trainer.wandb: ") and "pip install wandb" in line
    assert list(tmp_path.iterdir()) == []


def test_console_lines_also_go_to_gem_train_log(finished_run):
    out, done = finished_run
    printed = done.stdout.splitlines()
    train_line = next(line for line in printed if line.startswith("[train] | it   1 | return"))
    log = (out / "gem-train.log").read_text()
    # the screen shows the plain line; the log file keeps it with a timestamp
    assert f"[gem_train][INFO] - {train_line}" in log
    assert "[sft] | " in log and "held-out evaluation on toy:Guess-v0" in log
    # issue 34, point 6: a warm start's lines carry their count, not "[sft] | turns 560.000 | sft_loss 1.963"
    sft = [line for line in printed if line.startswith("[sft]")]
    assert sft and all(line.startswith(f"[sft] | epoch {i}/{len(sft)} | turns ") for i, line in enumerate(sft, 1))
    assert ".000" not in sft[0].split("|")[2]


def test_curves_have_integer_iteration_ticks_and_legends_clear_of_the_data(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gem_train.curves import plot_curves

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure plot_curves closes
    train = [{"kind": "train", "iteration": i, "return": 0.1 * i, "success": 0.2, "format_errors": 0.1, "turns": 2.0,
              "time_generate_s": 1.0, "time_env_s": 0.5, "time_rollout_other_s": 0.1, "update_s": 2.0, "sync_s": 0.1}
             for i in (1, 2, 3)]
    evals = [{"kind": "eval", "iteration": i, "env_id": "toy:Guess-v0", "eval_return": 0.3, "eval_success": 0.5}
             for i in (0, 3)]
    plot_curves([evals[0], *train, evals[1]], tmp_path / "curves.png")
    [fig] = figures
    fig.canvas.draw()
    for ax in fig.axes:
        low, high = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if low <= t <= high]
        assert ticks and all(float(t).is_integer() for t in ticks), (ax.get_title(), ticks)
        legend = ax.get_legend().get_window_extent()
        assert not legend.overlaps(ax.get_window_extent()), ax.get_title()


def test_without_tensorboard_and_matplotlib_a_run_keeps_its_figures_and_says_what_is_missing(tmp_path, monkeypatch,
                                                                                             capsys):
    """gem-train installed without its dependencies (gpu_check.sh's bundle on a GPU image): metrics.jsonl and
    curves.txt are written, a line says each missing package, and the run's last line names only what exists."""
    from gem_train.curves import curve_summary, write_curves, written
    from gem_train.metrics_log import MetricsLog

    for absent in ("tensorboard", "torch.utils.tensorboard", "matplotlib"):
        monkeypatch.setitem(sys.modules, absent, None)  # import raises ImportError
    log = MetricsLog(tmp_path / "metrics.jsonl", tensorboard_dir=tmp_path / "tensorboard")
    assert log.tensorboard is None and "the tensorboard package is not installed" in capsys.readouterr().out
    train = {"iteration": 1, "return": 0.5, "success": 0.5, "format_errors": 0.0, "turns": 2.0, "update_s": 1.0}
    log.write("train", **train)
    log.close()
    records = read_metrics(tmp_path / "metrics.jsonl")
    text = write_curves(records, tmp_path)
    assert text.endswith("no curves.png: the matplotlib package is not installed (pip install matplotlib)")
    assert (tmp_path / "curves.txt").read_text() == curve_summary(records) + "\n"
    assert not (tmp_path / "curves.png").exists() and written(tmp_path) == f"curves: {tmp_path / 'curves.txt'}"
    (tmp_path / "curves.png").touch()
    (tmp_path / "tensorboard").mkdir()
    assert written(tmp_path) == f"curves: {tmp_path / 'curves.png'}, TensorBoard: {tmp_path / 'tensorboard'}"


def test_a_broken_matplotlib_is_named_as_broken_not_as_missing(tmp_path, monkeypatch):
    """An installed plotting package that fails to import (a missing shared library, say) is not called missing:
    the line gives its own error, which ``pip install matplotlib`` would not fix; the figures are kept."""
    from gem_train.curves import write_curves

    broken = tmp_path / "site" / "matplotlib"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("libfreetype.so.6: cannot open shared object file")\n')
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    records = [{"kind": "train", "iteration": 1, "return": 0.5, "success": 0.5, "format_errors": 0.0, "turns": 2.0}]
    text = write_curves(records, tmp_path)
    assert text.endswith("no curves.png: the matplotlib package is installed but did not import (ImportError: "
                         "libfreetype.so.6: cannot open shared object file)"), text
    assert (tmp_path / "curves.txt").is_file() and not (tmp_path / "curves.png").exists()


def test_a_dataset_that_is_not_here_is_one_line(tmp_path):
    """The paper presets' datasets (ORZ-57k, HotpotQA, PrimeIntellect-15k) are on the hub only: without a local
    copy the run stops with the env's own message in one line, and how to pass the file in gem-train's terms."""
    done = gem_train(*SMALL, "env.id=toy:NoData-v0", "env.entry_point=toy_env:NoData", "trainer.sft.episodes=0",
                     cwd=tmp_path)
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert line.startswith("gem-train: bad config: env.id: toy:NoData-v0: This env needs the dataset")
    assert line.endswith("++env.kwargs.source=PATH") and "Traceback" not in done.stderr


def test_a_dataset_that_is_not_here_stops_the_run_before_the_weights_load(tmp_path):
    """With a real model (``model=hf``) the env is made before the weights load, so a missing dataset is the first
    thing said (here the folder's weights could not load at all; at 1.7B they would take a minute)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    done = gem_train(*SMALL, "env.id=toy:NoData-v0", "env.entry_point=toy_env:NoData", "trainer.sft.episodes=0",
                     "model=hf", f"model.path={folder}", cwd=tmp_path)
    assert done.returncode != 0
    [line] = done.stderr.splitlines()
    assert line.startswith("gem-train: bad config: env.id: toy:NoData-v0: This env needs the dataset")
