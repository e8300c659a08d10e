"""The reference package's math-grading helpers, over our supervised grader.

Reached as ``gem.utils.math_grader`` through gem-core's compatibility table. Every
comparison runs in the worker pool of :mod:`gem_envs_math.pool`, so each call returns
within its timeout whatever the answer is.
"""

from __future__ import annotations

from typing import Any

from gem_envs_math.extract import extract_final_answer
from gem_envs_math.pool import shared_pool


def grade(model_answer: str, gt_answer: str, fast: bool = True) -> bool:
    """Whether the bare answer ``model_answer`` equals ``gt_answer`` (``fast`` is accepted
    for the reference's signature; there is one grader here)."""
    del fast
    if not isinstance(model_answer, str) or not model_answer.strip():
        return False
    return shared_pool().compare(model_answer, str(gt_answer), None).correct


def boxed_reward_fn(
    model_response: str,
    gt_answer: str,
    fast: bool = False,
    correct_reward: float = 1.0,
    incorrect_reward: float = 0.0,
) -> tuple[dict[str, Any], float]:
    """``({"formatted": bool}, reward)`` for a full response whose final answer is boxed."""
    answer = extract_final_answer(model_response) if isinstance(model_response, str) else None
    if answer is None:
        return {"formatted": False}, incorrect_reward
    correct = grade(answer, gt_answer, fast)
    return {"formatted": True}, correct_reward if correct else incorrect_reward
