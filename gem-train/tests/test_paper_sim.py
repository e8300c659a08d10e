"""scale=paper_sim: the paper's path end to end on this CPU at small width (issue 35, point 6, in part): a Qwen3
model with Qwen3's full vocabulary rows, bf16 compute on float32 masters, gradient checkpointing, chunked log-probs,
token-budget micro-batches, no warm start."""

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
