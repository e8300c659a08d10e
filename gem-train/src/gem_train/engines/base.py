"""What every generation engine provides."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

# one set of sampling settings for `gem eval` and the trainer (temperature 0, its default, is greedy)
from gem.sampling import Sampling


def request_seeds(n: int, sampling: Sampling, seeds: Sequence[int] | None) -> list[int | None]:
    """The seed of each of ``n`` requests: ``seeds`` if given, else ``sampling.seed + i`` (None: unseeded)."""
    if seeds is not None:
        if len(seeds) != n:
            raise ValueError(f"{n} prompts but {len(seeds)} seeds")
        return list(seeds)
    return [None if sampling.seed is None else sampling.seed + i for i in range(n)]


#: positions of spare room the HF engines' KV cache keeps beyond what it holds (:mod:`gem_train.engines.kv_cache`):
#: a layer's cache is copied once in that many decode steps; the memory plan counts it
KV_ROOM = 128

#: what an engine's ``load_weights`` takes: a state dict, or ``(name, tensor)`` pairs made one at a time (the learner's
#: :meth:`~gem_train.learner.Learner.iter_weights`: one tensor's copy in the sampler's dtype exists at once, not the
#: whole model's, beside the sampler's own memory)
Weights = Mapping[str, Any] | Iterable[tuple[str, Any]]


def weight_pairs(weights: Weights) -> Iterator[tuple[str, Any]]:
    """The ``(name, tensor)`` pairs of ``weights``, a state dict or pairs, in order."""
    return iter(weights.items()) if isinstance(weights, Mapping) else iter(weights)


@dataclass
class Generation:
    """One response: its token ids (the eos token included when the model stopped), the
    sampler's logprob of each (after temperature and top-p, as the sampler drew it) and
    why it ended: ``stop`` (eos) or ``length`` (cut at ``max_tokens``)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str


class Engine(Protocol):
    def generate(
        self, prompts: list[list[int]], sampling: Sampling, seeds: Sequence[int] | None = None
    ) -> list[Generation]:
        """One response per prompt (prompts are token ids, the chat template already applied).

        ``seeds`` gives each request its own sampling seed, so a request draws the same
        tokens whichever batch it lands in; without it request ``i`` uses ``sampling.seed + i``.
        """

    def load_weights(self, weights: Weights) -> None:
        """Replace the served model's weights (after a policy update): a state dict or pairs taken in turn."""

    def close(self) -> None:
        """Free the engine's memory and threads."""


def sleep(engine: Engine | None) -> None:
    """Let ``engine`` free its accelerator memory while the learner updates, if it can (vLLM on a GPU)."""
    if engine is not None and hasattr(engine, "sleep"):
        engine.sleep()


def wake(engine: Engine | None, *tags: str) -> None:
    """Take the memory back after :func:`sleep`: of ``tags`` alone (``"weights"`` before the weight load), or all
    that still sleeps (the KV cache after it)."""
    if engine is not None and hasattr(engine, "wake"):
        engine.wake(*tags)


@runtime_checkable
class ContinuousEngine(Engine, Protocol):
    """An engine that also takes one request at a time and answers it as soon as it is done (continuous
    batching: requests join and leave the running batch between decode steps)."""

    async def agenerate(self, prompt: list[int], sampling: Sampling, seed: int | None = None) -> Generation:
        """One response to ``prompt``; ``seed`` seeds this request alone (None: unseeded)."""
