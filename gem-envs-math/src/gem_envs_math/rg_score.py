"""Scoring of reasoning-gym answers, run inside grading workers (see :mod:`.pool`).

A dataset's ``score_answer`` is arbitrary code (some parse with sympy), so it runs under
the same supervision as math grading: killed when it overruns.
"""

from __future__ import annotations

import functools
from typing import Any

import reasoning_gym


@functools.lru_cache(maxsize=64)
def _scorer(name: str, size: int, seed: int) -> Any:
    return reasoning_gym.create_dataset(name, size=size, seed=seed).score_answer


def score(name: str, size: int, seed: int, answer: str, entry: dict[str, Any]) -> float:
    """``score_answer`` of dataset ``name`` (built with ``size`` and ``seed``) on ``answer``."""
    return float(_scorer(name, size, seed)(answer=answer, entry=entry) or 0.0)
