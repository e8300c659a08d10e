"""MathEnv: one question, one answer, one reward."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from gem.conventions import FORMAT_ERROR, FORMAT_ERROR_REWARD
from gem.core import TERMINAL_STATE, StepResult
from gem.data import DatasetEnv, Records
from gem.reward_range import graded
from gem_envs_math import sources
from gem_envs_math.grading import Grade, agrade, grade

__all__ = ["FORMAT_ERROR_REWARD", "TERMINAL_STATE", "MathEnv"]


class MathEnv(DatasetEnv):
    """A single-turn env over a dataset of math problems (a contextual bandit).

    ``reset()`` poses a problem; ``step(response)`` grades the response's final answer
    (last ``\\boxed{}``, or ``#### N``) against the reference and ends the episode:
    reward 1.0 if correct, 0.0 if wrong, ``format_error_reward`` if no final answer can
    be found (GEM's convention is -0.1; the default 0.0 matches the reference envs).
    ``info["correct"]`` says whether it was right.

    Where the problems come from (first match wins):

    - ``dataset``: a sequence of dicts (kept as is, not copied),
    - ``path``: a local ``.jsonl`` / ``.json`` / ``.parquet`` file (the same as a file
      ``source``, kept as an alias),
    - ``source`` (:func:`gem.data.load_source`): a local file, or ``"hub:<name>"``
      (``"hub"`` with ``dataset_name``),
    - ``dataset_name`` (+ ``split``): a Hugging Face dataset, when the hub or its cache
      is reachable,
    - ``source``: a packaged dataset (``gsm8k-test``, ``math500``, ``math-test``,
      ``math-test-4.5k``, ``asdiv``; see :data:`gem_envs_math.sources.PACKAGED`).

    The step ends the episode with ``terminated`` and ``truncated`` both True, as the
    reference's single-turn envs do. The reference's ``use_format_error_reward=True``
    selects its -0.1; its ``eval=True`` means ``shuffle=False``; ``verbose`` is accepted
    (the reference's MathEnv ignores it too); ``use_mp`` is accepted and recorded, but grading always runs in a
    supervised worker pool (math-verify's own timeout only works in a main thread, and a
    pathological answer would otherwise hang the caller). ``env.dataset`` is the
    problems, assignable (``env.dataset = env.dataset.select(range(50))``).

    ``question_key``/``answer_key`` name the fields of file and hub records;
    ``subjects``/``levels`` filter MATH problems. ``reset(idx=i)`` poses problem ``i``
    (deterministic evaluation order); otherwise problems come in shuffled epochs drawn
    from the env's own RNG (``shuffle=False``: dataset order). Envs made from the same
    source, and spawned siblings, share one copy of the data (``env.records``).

    >>> import gem
    >>> env = gem.make("eval:MATH500")
    >>> question, info = env.reset(idx=0)
    >>> env.step(r"$\\boxed{(3, \\frac{\\pi}{2})}$")[1]
    1.0
    """

    #: rewards lie in [min(0, format_error_reward), 1]; gem.Env turns any other into a grading failure
    reward_range = graded

    def __init__(
        self,
        dataset_name: str | None = None,
        split: str | None = None,
        question_key: str = "problem",
        answer_key: str = "answer",
        *,
        source: str | None = None,
        path: str | None = None,
        dataset: Sequence[Mapping[str, Any]] | None = None,
        subjects: Sequence[str] | None = None,
        levels: Sequence[int] | None = None,
        shuffle: bool = True,
        format_error_reward: float | None = None,
        grade_timeout: float | None = None,
        use_format_error_reward: bool = False,
        use_mp: bool = True,
        eval: bool = False,  # the reference's keyword (it shadows the builtin here only)
        verbose: bool = False,
        **unknown: Any,
    ) -> None:
        if unknown:  # the reference swallows unknown arguments (e.g. max_turns=): say so instead of failing
            warnings.warn(f"MathEnv ignores unknown arguments: {', '.join(sorted(unknown))}", stacklevel=2)
        if dataset is not None:
            problems: Sequence[Mapping[str, Any]] = dataset
        elif path is not None:
            problems = sources.load_local(path, question_key=question_key, answer_key=answer_key)
        elif source is not None and not (dataset_name and source in sources.PACKAGED):
            problems = sources.load(source, dataset_name, split, question_key=question_key, answer_key=answer_key)
        elif dataset_name:
            problems = sources.load_hub(dataset_name, split, question_key=question_key, answer_key=answer_key)
        else:
            raise ValueError("MathEnv needs a source: dataset=, path=, dataset_name= or source=")
        if subjects or levels:
            if not isinstance(problems, Records):
                problems = Records("dataset", problems)
            problems = sources.select(problems, subjects, levels)
        super().__init__(problems, shuffle=shuffle and not eval)
        # in-memory datasets keep their own keys; loaded ones are normalised
        loaded = dataset is None
        self.question_key = "problem" if loaded else question_key
        self.answer_key = "answer" if loaded else answer_key
        if format_error_reward is None:
            format_error_reward = FORMAT_ERROR_REWARD if use_format_error_reward else 0.0
        self.format_error_reward = float(format_error_reward)
        self.use_mp, self.verbose = use_mp, verbose
        self.grade_timeout = grade_timeout

    def pose(self, record: Mapping[str, Any]) -> str:
        return str(record[self.question_key])

    @property
    def question(self) -> str:
        """The current problem's text."""
        return self.pose(self.record)

    @property
    def answer(self) -> Any:
        """The current problem's reference answer (a string, or a list of acceptable ones)."""
        return self.record[self.answer_key]

    @answer.setter
    def answer(self, answer: Any) -> None:
        # the reference's evaluation loop: ``env.answer = gold; env.step(response)``
        self.record = {**(self.record if self.index is not None else {}), self.answer_key: answer}

    # -- the single step --------------------------------------------------------------
    def step(self, action: str) -> StepResult:
        reference = self._reference()
        return self._outcome(grade(_text(action), reference, timeout=self.grade_timeout), reference)

    async def astep(self, action: str) -> StepResult:
        """:meth:`step` for asyncio code: the grade is awaited on the pool, no thread is held."""
        reference = self._reference()
        return self._outcome(await agrade(_text(action), reference, timeout=self.grade_timeout), reference)

    def _reference(self) -> str | list:
        reference = self.answer
        return reference if isinstance(reference, (str, list)) else str(reference)

    def _outcome(self, result: Grade, reference: str | list) -> StepResult:
        if result.correct:
            reward = 1.0
        elif result.format_error:
            reward = self.format_error_reward
        else:
            reward = 0.0
        info = {
            "correct": result.correct,
            FORMAT_ERROR: result.format_error,
            "extracted_answer": result.extracted,
            "grade_status": result.status,
            "reference_answer": reference,
            "idx": self.index,
        }
        return TERMINAL_STATE, reward, True, True, info

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(0, 100)}}}"

    def audit_answers(self) -> tuple[str, str]:
        """``gem audit``'s right and wrong in-format answers (:mod:`gem.audit`)."""
        return audit_answers(self.answer)


#: an in-format answer no problem of ours has (gem audit's honest baseline)
WRONG_ANSWERS = ("-987654321", "-123456789")


def audit_answers(reference: object) -> tuple[str, str]:
    """The boxed reference answer and a boxed number that is not it: with them ``gem audit`` compares every
    strategy with a wrong answer (no lucky hits) and calls one severe when it earns what the right one does."""
    right = str(reference[0] if isinstance(reference, list) and reference else reference)
    wrong = WRONG_ANSWERS[0] if right.strip() != WRONG_ANSWERS[0] else WRONG_ANSWERS[1]
    return f"\\boxed{{{right}}}", f"\\boxed{{{wrong}}}"


def _text(action: object) -> str:
    return action if isinstance(action, str) else str(action)
