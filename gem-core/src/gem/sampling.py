"""Generation settings shared by everything that asks a model for text (``gem eval``, trainers)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    """Generation settings of one request; temperature 0 is greedy, and ``seed`` makes
    sampling servers reproducible.

    >>> Sampling(temperature=1.0, max_tokens=16).top_p
    1.0
    """

    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float = 1.0
    seed: int | None = None
