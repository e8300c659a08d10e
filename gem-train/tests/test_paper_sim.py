"""scale=paper_sim: the paper's path end to end on this CPU at small width (issue 35, point 6, in part): a Qwen3
model with Qwen3's full vocabulary rows, bf16 compute on float32 masters, gradient checkpointing, chunked log-probs,
token-budget micro-batches, continuous batching with carry-over, no warm start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_module

from gem_train.cli import to_train_config


def test_paper_sim_composes_the_paper_settings():
    with initialize_config_module("gem_train.conf", version_base="1.3"):
        cfg = to_train_config(compose("config", overrides=["experiment=baselines/guess_the_number", "scale=paper_sim"]))
    assert (cfg.model.name, cfg.model.dtype, cfg.model.tiny.architecture) == ("tiny", "bfloat16", "qwen3")
    assert cfg.model.tiny.embedding_rows == 151936 and cfg.trainer.sft.episodes == 0
    t = cfg.trainer
    assert t.gradient_checkpointing and t.logprob_chunk and t.micro_batch_tokens and t.lr == 1e-6
    assert cfg.env.id == "game:GuessTheNumber-v0-easy"
    assert cfg.rollout.engine == "hf_async" and cfg.rollout.carry_over  # the paper's rollouts, without vLLM


def test_the_issues_paper_sim_command_completes_on_cpu(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([str(Path(sys.executable).with_name("gem-train")), "experiment=baselines/guess_the_number",
                           "scale=paper_sim", "trainer.iterations=2", f"experiment.output_dir={out}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    built = json.loads((out / "model_init" / "config.json").read_text())
    assert built["model_type"] == "qwen3" and built["vocab_size"] == 151936
    kinds = [json.loads(line)["kind"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert kinds.count("train") == 2 and "sft" not in kinds  # no warm start, as the paper
    checkpoint = json.loads((out / "checkpoints" / "iter_000002" / "config.json").read_text())
    assert checkpoint.get("dtype", checkpoint.get("torch_dtype")) == "float32"  # the masters


def test_a_resumed_run_samples_from_the_checkpoints_bf16_copy_and_repeats_the_uninterrupted_one(tmp_path,
                                                                                               monkeypatch):
    """A checkpoint holds the float32 masters and serve/, the same model in bf16: the resumed run's learner takes
    the masters, its sampler the bf16 copy (half the bytes to read at 1.7B), and the run goes on as if never
    stopped. Collected per iteration by the batch engine: which requests share a continuous batch depends on
    timing, and a bf16 row's logits move with its batch's padding."""
    import torch
    from safetensors.torch import load_file

    import gem_train.trainer
    from gem_train.metrics_log import read_metrics

    engines: list[str] = []
    real = gem_train.trainer.make_engine
    monkeypatch.setattr(gem_train.trainer, "make_engine",
                        lambda name, path, **kw: engines.append(path) or real(name, path, **kw))

    def run(out: Path, iterations: int) -> None:
        with initialize_config_module("gem_train.conf", version_base="1.3"):
            cfg = to_train_config(compose("config", overrides=[
                "experiment=baselines/guess_the_number", "scale=paper_sim", "rollout=hf", "rollout.carry_over=false",
                "trainer.checkpoint_every=1", "trainer.eval_every=0", "trainer.tensorboard=false", "trainer.lr=1e-4",
                f"trainer.iterations={iterations}", f"experiment.output_dir={out}"]))
        gem_train.trainer.train(cfg)

    whole, split = tmp_path / "whole", tmp_path / "split"
    run(whole, 2)
    run(split, 1)
    run(split, 2)
    assert engines[-1] == str(split / "checkpoints" / "iter_000001" / "serve")
    a, b = (read_metrics(run_dir / "metrics.jsonl") for run_dir in (whole, split))
    assert [r["iteration"] for r in b if r["kind"] == "train"] == [1, 2]
    for ra, rb in zip(a, b):
        for key in ("return", "turns", "response_tokens", "loss", "entropy", "grad_norm"):
            if key in ra:
                assert rb[key] == ra[key], (ra["kind"], ra.get("iteration"), key)
    wa, wb = (load_file(run_dir / "checkpoints" / "iter_000002" / "model.safetensors") for run_dir in (whole, split))
    assert all(torch.equal(wa[key], wb[key]) for key in wa)
