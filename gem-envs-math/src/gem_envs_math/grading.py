"""Grade a model's response against a reference answer.

The final answer is extracted in the caller (a linear scan, see :mod:`.extract`), and an
answer that equals the reference as text (:func:`~.verify.canonical_text`, a few linear
regex passes over at most :data:`MAX_ANSWER_CHARS` characters) is accepted in the caller
too; every other comparison runs in the supervised worker pool (see :mod:`.pool`), so a
grade always returns within its timeout and is safe from any thread or event loop.

>>> grade(r"... so the answer is $\\boxed{\\frac{3}{4}}$.", "0.75").correct
True
"""

from __future__ import annotations

from dataclasses import dataclass

from gem_envs_math.extract import extract_final_answer
from gem_envs_math.pool import GradingPool, Verdict, shared_pool
from gem_envs_math.verify import canonical_text

#: longer extracted answers are scored wrong without parsing: no reference answer in
#: these datasets comes close, and parsing cost grows with length
MAX_ANSWER_CHARS = 2000


@dataclass(frozen=True)
class Grade:
    """The result of grading one response.

    ``status``: ``"graded"``, ``"no_answer"`` (no final answer found: a format error),
    ``"too_long"``, ``"timeout"`` (the answer's own grading spent its CPU budget),
    ``"memory"`` (its grading alone went over the pool's memory budget) or ``"crashed"``
    (the grading worker died).
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


def _references(reference: str | list[str]) -> list[str]:
    return [reference] if isinstance(reference, str) else [str(r) for r in reference]


def _textually_equal(answer: str, references: list[str]) -> bool:
    text = canonical_text(answer)
    return any(text == canonical_text(ref) for ref in references if len(ref) <= MAX_ANSWER_CHARS)


def _combine(answer: str, verdicts: list[Verdict]) -> Grade:
    if any(v.correct for v in verdicts):
        return Grade(True, answer, "graded")
    failed = [v.status for v in verdicts if v.status != "graded"]
    return Grade(False, answer, failed[-1] if failed else "graded")


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
    references = _references(reference)
    if _textually_equal(answer, references):
        return Grade(True, answer, "graded")
    pool = pool or shared_pool()
    verdicts = []
    for ref in references:
        verdicts.append(pool.compare(answer, ref, timeout))
        if verdicts[-1].correct:
            break
    return _combine(answer, verdicts)


async def agrade(
    response: str, reference: str | list[str], *, timeout: float | None = None, pool: GradingPool | None = None
) -> Grade:
    """:func:`grade` for asyncio code: the comparisons are awaited on the pool (no thread
    is held per answer, and the event loop never blocks)."""
    answer, early = _precheck(response)
    if early is not None:
        return early
    references = _references(reference)
    if _textually_equal(answer, references):
        return Grade(True, answer, "graded")
    pool = pool or shared_pool()
    verdicts = []
    for ref in references:
        verdicts.append(await pool.acompare(answer, ref, timeout))
        if verdicts[-1].correct:
            break
    return _combine(answer, verdicts)
