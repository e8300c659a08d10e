"""A memory plan before the run: what one GPU holds for a config, from the model's ``config.json`` alone.

    python -m gem_train.plan experiment=paper_games model.path=/models/Qwen3-1.7B-Base [gpu_memory=80GiB] [gpus=1]
    python -m gem_train.plan experiment=paper_math gpu_memory=40GiB     # before the download: Qwen3-4B-Base's shape

Reads the model's shape (no weights are loaded; ``model=tiny`` uses the shape it would build; with no
``model.path``, the published shape of the preset's ``model.hub_name``, where :data:`PUBLISHED` has it), and prints, per
GPU, what the learner keeps (float32 master weights, their gradients, AdamW's two moments, autocast's copies in the
compute dtype), the activations of one micro-batch at the token budget (every layer's, or with gradient checkpointing
the layer boundaries and one layer being recomputed), the full-vocabulary log-probs that exist at once, and what the
sampler holds (vLLM's ``gpu_memory_utilization`` share; the HF engine's weights and KV cache); then the step's token
counts and what the checkpoints take on disk (each, and all that ``trainer.keep_checkpoints`` keeps). vLLM sleeps
during the update on a GPU, so the peak is the largest of three phases: the update (every
learner row), generation (the learner's weights and moments beside vLLM's share) and the weight sync (the same
with vLLM's weights woken but not yet its KV cache, and the one tensor in flight, or sharded the gathered copy).
Exits 1, naming the fields to change, when the peak does not fit ``gpu_memory``. ``gem-train`` runs the same check
first when it trains on a GPU.

With ``trainer.strategy=ddp`` every GPU holds the whole model and optimizer, so ``gpus`` divides the batch, not the
memory; with ``fsdp`` each GPU holds 1/``gpus`` of the float32 weights, their gradients and AdamW's moments (a
layer is gathered whole only while it computes, and the sampler's copy is whole). These are estimates from the
shapes (within some 10 %: allocator slack, CUDA context and temporaries are not counted), meant to tell a config
that cannot fit from one that may.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GiB = 1 << 30
_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(GiB|GB|G|MiB|MB|M)?\s*$", re.I)
#: the engines whose memory is vLLM's reserved share
_VLLM = ("vllm", "vllm_async")
#: the config.json fields the plan reads of the models the shipped presets name (``model.hub_name``), as
#: published with their weights: with no ``model.path`` the plan uses these, so it needs no download
PUBLISHED: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-1.7B-Base": {"hidden_size": 2048, "num_hidden_layers": 28, "intermediate_size": 6144,
                             "vocab_size": 151936, "num_attention_heads": 16, "num_key_value_heads": 8,
                             "head_dim": 128, "tie_word_embeddings": True},
    "Qwen/Qwen3-4B-Base": {"hidden_size": 2560, "num_hidden_layers": 36, "intermediate_size": 9728,
                           "vocab_size": 151936, "num_attention_heads": 32, "num_key_value_heads": 8,
                           "head_dim": 128, "tie_word_embeddings": True},
}


@dataclass(frozen=True)
class Shape:
    """What the plan needs of a decoder-only transformer."""

    hidden: int
    layers: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Shape:
        text = config.get("text_config") or config
        hidden, heads = int(text["hidden_size"]), int(text["num_attention_heads"])
        return cls(hidden, int(text["num_hidden_layers"]), int(text["intermediate_size"]), int(text["vocab_size"]),
                   heads, int(text.get("num_key_value_heads") or heads), int(text.get("head_dim") or hidden // heads),
                   bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))))

    @property
    def parameters(self) -> int:
        h, q, kv = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim
        layer = h * q + 2 * h * kv + q * h + 3 * h * self.intermediate + 2 * h + 2 * self.head_dim
        head = 0 if self.tied else self.vocab * h
        return self.vocab * h + self.layers * layer + h + head


def parse_size(text: str) -> int:
    """``80GiB``, ``80GB``, ``80`` (GiB), ``512MiB`` -> bytes."""
    match = _SIZE.match(str(text))
    if match is None:
        raise ValueError(f"gpu_memory={text!r}: give a size such as 80GiB or 141GB")
    value, unit = float(match.group(1)), (match.group(2) or "GiB").lower()
    scale = {"gib": GiB, "g": GiB, "gb": 10**9, "mib": 1 << 20, "m": 1 << 20, "mb": 10**6}[unit]
    return int(value * scale)


def model_shape(cfg: Any) -> Shape:
    """The shape of the model ``cfg`` trains: its folder's config.json (or, where ``model.path`` is the preset's
    hub name, :data:`PUBLISHED`), or the tiny model it would build."""
    m = cfg.model
    if hub := published(cfg):
        return Shape.from_config(PUBLISHED[hub])
    if m.name == "hf":
        path = Path(str(m.path)) / "config.json"
        if not path.is_file():
            raise ValueError(f"model.path: no config.json at {path} (the plan reads the shape only, no weights)")
        return Shape.from_config(json.loads(path.read_text()))
    t = m.tiny
    return Shape(t.hidden_size, t.num_layers, t.intermediate_size, max(t.vocab_size, t.embedding_rows or 0),
                 t.num_heads, t.num_kv_heads, t.hidden_size // t.num_heads, True)


def published(cfg: Any) -> str | None:
    """The hub name whose :data:`PUBLISHED` shape the plan uses: where ``model.path`` is the preset's hub name
    (what the command line fills in when no path is given) and no folder of that name is here."""
    m = cfg.model
    named = m.name == "hf" and m.path == m.hub_name and m.hub_name in PUBLISHED
    return m.hub_name if named and not (Path(str(m.path)) / "config.json").is_file() else None


def plan(cfg: Any, gpu_memory: int, gpus: int = 1) -> tuple[list[tuple[str, int]], list[str]]:
    """``(rows, fixes)``: the bytes per GPU of each part, and the fields to change when they do not fit."""
    shape, t, r = model_shape(cfg), cfg.trainer, cfg.rollout
    p, compute = shape.parameters, _BYTES[cfg.model.dtype]
    tokens = t.micro_batch_tokens or t.micro_batch_size * cfg.model.max_model_len
    per_layer = tokens * (6 * shape.hidden + 3 * shape.intermediate) * compute  # one layer's saved activations
    boundaries = tokens * shape.hidden * compute * shape.layers
    activations = boundaries + per_layer if t.gradient_checkpointing else per_layer * shape.layers
    positions = min(t.logprob_chunk, tokens) if t.logprob_chunk else tokens
    logits = positions * shape.vocab * 4 * 3  # fp32 logits, their log-softmax and its exp for the entropy
    # fsdp shards the float32 weights, their gradients and AdamW's moments over the GPUs; ddp copies them
    shards = gpus if t.strategy == "fsdp" else 1
    part = f", 1/{shards}" if shards > 1 else ""
    rows = [(f"master weights (float32{part})", 4 * p // shards), (f"gradients (float32{part})", 4 * p // shards),
            (f"AdamW moments (float32{part})", 8 * p // shards)]
    if compute != 4:
        rows.append((f"autocast copies ({cfg.model.dtype})", compute * p))
    rows += [(f"activations, {tokens} tokens" + (" (checkpointed)" if t.gradient_checkpointing else ""),
              activations), (f"log-probs, {positions} positions x {shape.vocab} vocabulary", logits)]
    if r.engine in _VLLM:
        rows.append((f"{ASLEEP}vLLM's share ({r.vllm.gpu_memory_utilization:g} of the GPU)",
                     int(r.vllm.gpu_memory_utilization * gpu_memory)))
    else:
        from gem_train.engines.base import KV_ROOM

        # a full window per request, and the cache's spare room
        kv = (2 * shape.layers * shape.kv_heads * shape.head_dim * compute * r.concurrency
              * (cfg.model.max_model_len + KV_ROOM))
        rows.append(("sampler: HF engine's weights and KV cache", compute * p + kv))
    # vLLM wakes its weights alone for the sync and its KV cache after it; the sync streams the weights in one
    # tensor at a time (the largest: the embedding); sharded, the whole copy is gathered first
    if r.engine in _VLLM:
        rows.append((f"{SYNC}vLLM's weights, not its KV cache ({cfg.model.dtype})", compute * p))
    rows.append((f"{SYNC}the whole model gathered ({cfg.model.dtype})", compute * p) if t.strategy == "fsdp" else
                (f"{SYNC}a tensor at a time (the embedding, {cfg.model.dtype})",
                 compute * shape.vocab * shape.hidden))
    fixes = []
    if peak(rows) > gpu_memory:
        if not t.gradient_checkpointing:
            fixes.append("trainer.gradient_checkpointing=true")
        if not t.logprob_chunk:
            fixes.append("trainer.logprob_chunk=1024")
        if activations + logits > gpu_memory / 8:
            fixes.append(f"trainer.micro_batch_tokens (now {tokens} tokens per forward/backward)")
        if r.engine in _VLLM:
            fixes.append(f"rollout.vllm.gpu_memory_utilization (now {r.vllm.gpu_memory_utilization:g}: with the "
                         "learner's weights and AdamW moments beside it)")
        if t.strategy != "fsdp":
            fixes.append("trainer.strategy=fsdp with more GPUs (gpus=N): each holds 1/N of the weights, gradients "
                         "and optimizer")
        fixes.append("a larger GPU (gpu_memory=...)")
    return rows, fixes


#: the label of the sampler's share when it sleeps during the update (vLLM on a GPU)
ASLEEP = "sampler, asleep in updates: "
#: the label of what the weight sync adds to the sampler and the learner's kept rows (after the update)
SYNC = "weight sync: "
#: what the learner keeps while the sampler generates (the gradients are freed after each step)
_KEPT = ("master weights", "AdamW moments")


def peak(rows: Sequence[tuple[str, int]]) -> int:
    """The most the GPU holds at once: during the update every learner row; during generation the learner's kept
    rows and the sampler's; during the weight sync the kept rows and the sync's (a sleeping sampler's woken
    weights among them: its KV cache wakes after the load). A sampler that does not sleep adds to all three.

    >>> peak([("master weights (float32)", 4), ("gradients (float32)", 4), (ASLEEP + "vLLM", 10), (SYNC + "x", 1)])
    14
    >>> peak([("master weights (float32)", 4), (ASLEEP + "vLLM", 2), (SYNC + "weights", 1), (SYNC + "x", 3)])
    8
    """
    update = sum(b for name, b in rows if not name.startswith((ASLEEP, SYNC)))
    kept = sum(b for name, b in rows if name.startswith(_KEPT) or
               (name.startswith("sampler") and not name.startswith(ASLEEP)))
    generation = kept + sum(b for name, b in rows if name.startswith(ASLEEP))
    sync = kept + sum(b for name, b in rows if name.startswith(SYNC))
    return max(update, generation, sync)


#: torch's words for a device out of memory, also where an episode's error comes back as text (the stream's)
_OOM_TEXT = re.compile(r"(CUDA|MPS|XPU|HIP) out of memory|OutOfMemoryError")


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from, is the device running out of memory."""
    import torch

    kind = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes, not a cycle
        if seen is None:
            return False
        if isinstance(seen, kind) or _OOM_TEXT.search(str(seen)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def memory_fields(cfg: Any, phase: str) -> list[str]:
    """The settings that size ``phase``'s memory (``update``, ``generation``, ``evaluation``, ``weight sync``, or a
    phase of the setup), with their values: what to change when the device runs out of memory there."""
    t, r = cfg.trainer, cfg.rollout
    learner = [f"trainer.micro_batch_tokens (now {t.micro_batch_tokens})" if t.micro_batch_tokens else
               f"trainer.micro_batch_size (now {t.micro_batch_size}; or a token budget, trainer.micro_batch_tokens)",
               f"trainer.logprob_chunk (now {t.logprob_chunk})" if t.logprob_chunk else "trainer.logprob_chunk=1024"]
    if not t.gradient_checkpointing:
        learner.append("trainer.gradient_checkpointing=true")
    sampler = ([f"rollout.vllm.gpu_memory_utilization (now {r.vllm.gpu_memory_utilization:g})"] if r.engine in _VLLM
               else [f"rollout.concurrency (now {r.concurrency})", f"rollout.max_tokens (now {r.max_tokens})"])
    if phase in ("update", "warm start (SFT)"):
        # the HF engine keeps its weights through the update; vLLM sleeps
        fields = learner + ([] if r.engine in _VLLM else sampler[:1])
    elif phase in ("generation", "evaluation", "weight sync", "sampler start"):
        fields = sampler
    else:
        fields = []
    if t.strategy != "fsdp":
        fields.append("trainer.strategy=fsdp over more GPUs (each holds a share of the weights and optimizer)")
    return [*fields, "a GPU with more memory"]


def _disk(size: int) -> str:
    return f"{size / GiB:.1f} GiB" if size >= GiB else f"{size / (1 << 20):.1f} MiB"


def checkpoint_line(cfg: Any, shape: Shape) -> str:
    """What the run's checkpoints take on disk: one's size (the float32 weights, AdamW's moments, the serving copy in
    the compute dtype; the tokenizer and a PPO critic besides), how many the run writes and how many it keeps."""
    from gem_train.checkpoint import saves_at

    t, p, compute = cfg.trainer, shape.parameters, _BYTES[cfg.model.dtype]
    serving = compute * p if t.serving_copy and compute != 4 else 0
    size = 12 * p + serving
    written = sum(saves_at(i, t.checkpoint_every, t.iterations) for i in range(1, t.iterations + 1))
    kept = min(written, t.keep_checkpoints) if t.keep_checkpoints is not None else written
    # the warm start's model (iteration 0): float32 weights alone, never removed
    warm = 4 * p if t.sft.episodes > 0 else 0
    if not written and not warm:
        return "checkpoints on disk: none" + (" (trainer.checkpoint_every=null)" if t.checkpoint_every is None else "")
    parts = "float32 weights, AdamW moments" + (f", {cfg.model.dtype} serving copy" if serving else "")
    return (f"checkpoints on disk: {_disk(size)} each ({parts}), {written} in {t.iterations} iterations, "
            f"{'the newest ' if kept < written else ''}{kept} kept: {_disk(kept * size + warm)}"
            + (" with the warm start's" if warm else "")
            + (f", {_disk((kept + 1) * size + warm)} while the next is written" if kept < written else "")
            + (" (trainer.keep_checkpoints bounds it)" if t.keep_checkpoints is None and written > 2 else ""))


def report(cfg: Any, gpu_memory: int, gpus: int = 1) -> tuple[str, bool]:
    """The plan as text, and whether it fits."""
    rows, fixes = plan(cfg, gpu_memory, gpus)
    shape = model_shape(cfg)
    total = peak(rows)
    r = cfg.rollout
    turns = r.turns_per_iter or r.episodes_per_iter
    lines = [f"memory plan per GPU ({gpus} GPU{'s' if gpus > 1 else ''}, {gpu_memory / GiB:.0f} GiB each): "
             f"{shape.parameters / 1e9:.2f}B parameters, {shape.layers} layers, hidden {shape.hidden}, "
             f"vocabulary {shape.vocab}" + (f" ({hub}'s published config.json: no model.path given, nothing "
                                            "downloaded)" if (hub := published(cfg)) else "")]
    lines += [f"  {name:<60} {size / GiB:8.2f} GiB" for name, size in rows]
    lines.append(f"  {'peak (the update, generation or the sync)':<60} {total / GiB:8.2f} GiB of "
                 f"{gpu_memory / GiB:.0f} GiB")
    lines.append(f"a step: about {turns} turns of up to {r.max_tokens} response tokens "
                 f"({turns * r.max_tokens} response tokens; prompts up to {cfg.model.max_model_len} tokens each), "
                 f"{-(-turns // gpus)} turns per GPU")
    lines.append(checkpoint_line(cfg, shape))
    fits = not fixes
    lines.append("fits" if fits else "does not fit; change: " + "; ".join(fixes))
    return "\n".join(lines), fits


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    gpu_memory, gpus, overrides = 80 * GiB, 1, []
    try:
        for arg in args:
            key, _, value = arg.partition("=")
            if key == "gpu_memory":
                gpu_memory = parse_size(value)
            elif key == "gpus":
                if not value.isdigit() or int(value) < 1:
                    raise ValueError(f"gpus must be a whole number >= 1, got {value!r}")
                gpus = int(value)
            else:
                overrides.append(arg)
    except ValueError as exc:
        raise SystemExit(f"gem_train.plan: {exc}") from None
    from gem_train.config import compose_train_config

    if not any(arg.startswith(("model.path=", "++model.path=", "+model.path=")) for arg in overrides):
        # a preset's model need not be here: its hub name, whose published shape the plan knows
        overrides = ["model.path=${model.hub_name}", *overrides]
    cfg = compose_train_config(overrides, "gem_train.plan")
    try:
        text, fits = report(cfg, gpu_memory, gpus)
    except ValueError as exc:
        raise SystemExit(f"gem_train.plan: {exc}") from None
    print(text)
    return 0 if fits else 1


if __name__ == "__main__":
    sys.exit(main())
