"""Grade a model's response against a reference answer.

The final answer is extracted in the caller (a linear scan, see :mod:`.extract`); the
comparison runs in the supervised worker pool (see :mod:`.pool`), so a grade always
returns within its timeout and is safe from any thread or event loop.

>>> grade(r"... so the answer is $\\boxed{\\frac{3}{4}}$.", "0.75").correct
True
"""

from __future__ import annotations

from dataclasses import dataclass

from gem_envs_math.extract import extract_final_answer
from gem_envs_math.pool import GradingPool, shared_pool

#: longer extracted answers are scored wrong without parsing: no reference answer in
#: these datasets comes close, and parsing cost grows with length
MAX_ANSWER_CHARS = 2000


@dataclass(frozen=True)
class Grade:
    """The result of grading one response.

    ``status``: ``"graded"``, ``"no_answer"`` (no final answer found: a format error),
    ``"too_long"``, ``"timeout"`` or ``"crashed"`` (the grading worker died).
    """

    correct: bool
    extracted: str | None
    status: str

    @property
    def format_error(self) -> bool:
        return self.status == "no_answer"


def _precheck(response: str) -> tuple[str | None, Grade | None]:
    answer = extract_final_answer(response)
    if answer is None:
        return None, Grade(False, None, "no_answer")
    if len(answer) > MAX_ANSWER_CHARS:
        return None, Grade(False, answer[:100] + "...", "too_long")
    return answer, None


def grade(
    response: str, reference: str | list[str], *, timeout: float | None = None, pool: GradingPool | None = None
) -> Grade:
    """Grade ``response`` (full model output) against ``reference`` (a bare answer, or a
    list of acceptable answers).

    ``timeout`` bounds each comparison (default: the pool's); ``pool`` defaults to the
    process-wide :func:`~gem_envs_math.pool.shared_pool`.
    """
    answer, early = _precheck(response)
    if early is not None:
        return early
    pool = pool or shared_pool()
    references = [reference] if isinstance(reference, str) else list(reference)
    status = "graded"
    for ref in references:
        verdict = pool.compare(answer, str(ref), timeout)
        if verdict.correct:
            return Grade(True, answer, "graded")
        if verdict.status != "graded":
            status = verdict.status
    return Grade(False, answer, status)


async def agrade(
    response: str, reference: str | list[str], *, timeout: float | None = None, pool: GradingPool | None = None
) -> Grade:
    """:func:`grade` for asyncio code (runs in a thread; the event loop never blocks)."""
    import asyncio

    return await asyncio.to_thread(grade, response, reference, timeout=timeout, pool=pool)
