"""A run out of device memory says where and what to change, in one paragraph, and resumes with smaller pieces.

On a GPU the first thing a new setting meets is often CUDA's out-of-memory error: a traceback from deep inside
torch that names neither the phase nor the settings. The errors here are torch's own class raised by a stand-in
(a real one needs a GPU)."""

from __future__ import annotations

import pytest
import torch
from test_run_dir import gem_train

from gem_train.metrics_log import read_metrics
from gem_train.plan import is_out_of_memory

SMALL = ["experiment=smoke", "env=custom", "env.id=toy:Guess-v0", "env.entry_point=toy_env:ToyGuess",
         "env.demonstrator=toy_env:Bisect", "trainer.sft.episodes=0", "trainer.eval_every=0",
         "trainer.tensorboard=false", "trainer.checkpoint_every=1", "trainer.iterations=2"]
OOM = "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.19 GiB"


#: run first in the gem-train process: the stand-in that raises torch's own error in the second update
SECOND_UPDATE = f"""
import torch, gem_train.learner
real, calls = gem_train.learner.Learner.update, []
def update(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 2:
        raise torch.OutOfMemoryError({OOM!r})
    return real(self, *args, **kwargs)
gem_train.learner.Learner.update = update
"""
#: the same in the sampler's first prompt pass (the batch engine's and the continuous one's)
SAMPLER = f"""
import torch
from gem_train.engines.hf import HFEngine
def prefill(self, *args, **kwargs):
    raise torch.OutOfMemoryError({OOM!r})
HFEngine.prefill = prefill
"""


def test_an_update_out_of_memory_names_the_phase_the_settings_and_the_checkpoint(tmp_path):
    out = tmp_path / "run"
    done = gem_train(*SMALL, f"experiment.output_dir={out}", cwd=tmp_path, prelude=SECOND_UPDATE)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("gem-train: out of device memory in the update of iteration 2 (CUDA out of memory")
    assert "trainer.micro_batch_size (now" in line and "trainer.logprob_chunk" in line
    assert "The checkpoint of iteration 1 is kept" in line
    # the pieces the update is cut into may change on resume (they do not change what it computes)
    done = gem_train(*SMALL, f"experiment.output_dir={out}", "trainer.micro_batch_size=2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["iteration"] for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"] == [1, 2]


@pytest.mark.parametrize("engine", ["hf", "hf_async"])
def test_a_sampler_out_of_memory_names_the_samplers_settings(tmp_path, engine):
    done = gem_train(*SMALL, f"rollout={engine}", f"experiment.output_dir={tmp_path / 'run'}", cwd=tmp_path,
                     prelude=SAMPLER)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("gem-train: out of device memory in the generation of iteration 1")
    assert "rollout.concurrency (now" in line and "micro_batch" not in line


@pytest.mark.parametrize(("error", "oom"), [
    (torch.OutOfMemoryError(OOM), True),
    # the stream and the runner re-raise an episode's error as text
    (RuntimeError(f"every one of 4 episodes failed, the first with OutOfMemoryError: {OOM}"), True),
    (RuntimeError("the program ran out of memory"), False),  # an env's words about its own sandbox
    (ValueError("boom"), False),
])
def test_what_counts_as_the_device_out_of_memory(error, oom):
    assert is_out_of_memory(error) == oom
