"""The transformers engine with continuous batching: each request returns as soon as its own response is done.

:class:`HFEngine` answers a whole batch per ``generate`` call, so one long reply holds every episode of its batch
and a finished row keeps costing a place in every decode step until the longest is done. This engine keeps one
running batch on a stepping thread (:class:`~gem_train.engines.stepping.SteppingEngine`, as ``vllm_async`` does):
between two decode steps, requests that arrived are prefilled together and join it (their KV cache left-padded to
the running batch's width, or the running batch's to theirs), and rows that finished leave it (their future
answered at once), so an episode's env step overlaps the others' generation and no step decodes a finished row.
Neither copies the cache of the rows that stay (:meth:`~gem_train.engines.kv_cache.GrowingLayer.keep`,
:meth:`~gem_train.engines.kv_cache.GrowingLayer.stack`): a finished row's place goes to the last row, and joining
rows take the places finished rows left.
The paper path's rollouts (continuous batching, episodes carried over iteration boundaries) on a machine without
vLLM: ``rollout=hf_async``.

Each request samples with its own generator, seeded as in the batch engine, so it draws what ``generate`` draws
for it (up to the last bits of float arithmetic, which depend on the batch's shape in both engines). The KV cache
is transformers' ``DynamicCache`` with full-attention layers that grow into spare room
(:mod:`~gem_train.engines.kv_cache`, as in the batch engine); a model with sliding-window or other cache layers is
refused with a message.

>>> engine = make_engine("hf_async", "runs/demo/model")                        # doctest: +SKIP
>>> gen = await engine.agenerate([1, 2, 3], Sampling(temperature=1.0, max_tokens=8), seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gem_train.engines.base import Generation, Sampling, Weights
from gem_train.engines.hf import NAN_MESSAGE, HFEngine, _drawable, sample
from gem_train.engines.kv_cache import GrowingLayer
from gem_train.engines.stepping import SteppingEngine


@dataclass
class _Row:
    """One request in the running batch."""

    request_id: str
    sampling: Sampling
    generator: torch.Generator
    #: tokens it may generate: max_tokens, or fewer where the prompt leaves less room in max_model_len
    limit: int
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


class HFAsyncEngine(SteppingEngine, HFEngine):
    """:class:`HFEngine` plus :meth:`agenerate`: one request at a time, continuously batched.

    ``generate`` (a whole batch per call) still works; the two must not run at the same time.
    """

    thread_name = "gem-train-hf-async"

    def __init__(self, model_path: str, max_model_len: int | None = None, gather_s: float = 0.002,
                 **options: Any) -> None:
        super().__init__(model_path, **options)
        # an idle engine waits this long for more requests (a prompt's pass per arrival costs a whole step here,
        # and requests that start a step apart finish a step apart: the stream then begins an episode more)
        self.max_model_len, self.gather_s = max_model_len, gather_s
        self._reset()
        self._start()

    async def agenerate(self, prompt: list[int], sampling: Sampling, seed: int | None = None) -> Generation:
        """One response to ``prompt`` (token ids), returned when it is done; ``seed`` seeds its sampling alone,
        so it draws the same tokens whichever requests it shares decode steps with."""
        return await self._submit((list(prompt), sampling, seed))

    def load_weights(self, weights: Weights) -> None:
        # between decode steps, on the stepping thread; rows in flight decode on under the new weights
        self._call(lambda: super(HFAsyncEngine, self).load_weights(weights))

    def close(self) -> None:
        self._stop_thread()
        super().close()

    # the stepping thread's side: the running batch

    def _reset(self) -> None:
        self._rows: list[_Row] = []
        self._new: list[tuple[_Row, list[int]]] = []
        self._cache: Any = None
        self._mask = self._next_pos = self._logits = None

    def _on_thread_start(self) -> None:
        # under torchrun the engine is on cuda:<rank>, but a new thread starts on cuda:0; a plain "cuda" (one process)
        # is the current device already
        device = torch.device(self.device)
        if device.type == "cuda" and device.index is not None:
            torch.cuda.set_device(device)

    def _add(self, request_id: str, payload: Any) -> None:
        prompt, sampling, seed = payload
        if not prompt:
            raise ValueError("an empty prompt: nothing to continue")
        if sampling.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {sampling.max_tokens}")
        limit = sampling.max_tokens
        if self.max_model_len is not None:
            # as vLLM: a prompt must leave room for one token; the reply stops at the window's end
            if len(prompt) >= self.max_model_len:
                raise ValueError(f"a prompt of {len(prompt)} tokens leaves no room in the engine's "
                                 f"max_model_len={self.max_model_len}")
            limit = min(limit, self.max_model_len - len(prompt))
        [generator] = self.generators([seed])
        self._new.append((_Row(request_id, sampling, generator, limit), prompt))

    def _abort(self, request_ids: list[str]) -> None:
        self._reset()

    @torch.no_grad()
    def _step(self) -> list[tuple[str, Any]]:
        if self._new:
            self._admit()
        rows = self._rows
        # each row's token, sampled in groups of equal settings
        groups: dict[tuple[float, float], list[int]] = {}
        for i, row in enumerate(rows):
            groups.setdefault((row.sampling.temperature, row.sampling.top_p), []).append(i)
        if len(groups) == 1:  # a training run's case: the logits as they are, no copy of (rows x vocabulary)
            nxt, chosen = sample(self._logits, rows[0].sampling, [row.generator for row in rows])
        else:
            nxt = torch.empty(len(rows), dtype=torch.long, device=self._logits.device)
            chosen = torch.empty(len(rows), dtype=torch.float32, device=self._logits.device)
            for indices in groups.values():
                at = torch.tensor(indices, device=self._logits.device)
                tokens, logprobs = sample(self._logits[at], rows[indices[0]].sampling,
                                          [rows[i].generator for i in indices])
                nxt[at], chosen[at] = tokens, logprobs
        step_tokens, step_logprobs = nxt.tolist(), chosen.tolist()
        finished: list[tuple[str, Any]] = []
        keep: list[int] = []
        for i, row in enumerate(rows):
            if not _drawable(step_logprobs[i]):
                finished.append((row.request_id, RuntimeError(NAN_MESSAGE)))
                continue
            row.tokens.append(step_tokens[i])
            row.logprobs.append(step_logprobs[i])
            if step_tokens[i] in self.stop_ids:
                finished.append((row.request_id, Generation(row.tokens, row.logprobs, "stop")))
            elif len(row.tokens) >= row.limit:
                finished.append((row.request_id, Generation(row.tokens, row.logprobs, "length")))
            else:
                keep.append(i)
        if not keep:  # the batch is empty (requests come in only between steps: none waits to join)
            self._rows, self._cache, self._mask, self._next_pos, self._logits = [], None, None, None, None
            return finished
        if len(keep) < len(rows):
            nxt = nxt[self._select(keep)]
        self._cache, self._mask, self._logits = self.decode(self._cache, self._mask, self._next_pos, nxt)
        self._next_pos = self._next_pos + 1
        return finished

    def _admit(self) -> None:
        """Prefill the requests that arrived and add them to the running batch."""
        rows, prompts = [r for r, _ in self._new], [p for _, p in self._new]
        self._new = []
        cache, mask, next_pos, logits = self.prefill(prompts)
        if not self._rows:
            self._rows, self._cache, self._mask, self._next_pos, self._logits = rows, cache, mask, next_pos, logits
            return
        # both batches left-padded to the wider one, then stacked
        width = max(self._mask.shape[1], mask.shape[1])
        for old, new in zip(_layers(self._cache), _layers(cache)):
            old.stack(new, width)
        self._mask = torch.cat([_pad_left(self._mask, width), _pad_left(mask, width)])
        self._next_pos = torch.cat([self._next_pos, next_pos])
        self._logits = torch.cat([self._logits, logits])
        self._rows = self._rows + rows

    def _select(self, keep: list[int]) -> torch.Tensor:
        """Keep only these rows (indices, ascending), without the left columns that are padding in every row left.
        Each row that leaves makes room for one of the last rows, so the cache copies only the rows that move (and
        only their positions kept); the rows' new order, as indices of the old (for the tensors beside the cache)."""
        count, kept = len(keep), set(keep)
        order = list(range(count))
        holes = iter([i for i in order if i not in kept])
        for i in keep[count - sum(i >= count for i in keep):]:  # the rows kept past the new end, one to each hole
            order[next(holes)] = i
        at = torch.tensor(order, device=self._mask.device)
        self._rows = [self._rows[i] for i in order]
        mask = self._mask[at]
        start = int(mask.any(0).int().argmax())
        self._mask, self._next_pos = mask[:, start:], self._next_pos[at]
        for layer in _layers(self._cache):
            layer.keep(order, start)
        return at


def _pad_left(mask: torch.Tensor, width: int) -> torch.Tensor:
    """A (B, W) attention mask with zeros before its positions up to ``width``."""
    return torch.cat([mask.new_zeros(mask.shape[0], width - mask.shape[1]), mask], dim=1)


def _layers(cache: Any) -> list[GrowingLayer]:
    """The cache's layers, each with ``keys`` and ``values`` of shape (batch, heads, positions, head dim)."""
    layers = getattr(cache, "layers", None)
    if layers is None or any(type(layer) is not GrowingLayer for layer in layers):
        raise RuntimeError(
            f"rollout.engine=hf_async needs transformers' layered KV cache with full attention in every layer (got "
            f"{type(cache).__name__}); use rollout=hf, which batches without joining requests mid-decode")
    return list(layers)
