"""MathEnv: one question, one answer, one reward."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import gem
from gem.core import StepResult
from gem_envs_math import sources
from gem_envs_math.grading import grade

#: the observation after the single step (the reference package's terminal marker)
TERMINAL_STATE = "<｜TERMINAL_STATE｜>"


class MathEnv(gem.Env):
    """A single-turn env over a dataset of math problems (a contextual bandit).

    ``reset()`` poses a problem; ``step(response)`` grades the response's final answer
    (last ``\\boxed{}``, or ``#### N``) against the reference and ends the episode:
    reward 1.0 if correct, 0.0 if wrong, ``format_error_reward`` if no final answer can
    be found (GEM's convention is -0.1; the default 0.0 matches the reference envs).
    ``info["correct"]`` says whether it was right.

    Where the problems come from (first match wins):

    - ``dataset``: a sequence of dicts (kept as is, not copied),
    - ``path``: a local ``.jsonl`` / ``.json`` / ``.parquet`` file,
    - ``dataset_name`` (+ ``split``): a Hugging Face dataset, when the hub or its cache
      is reachable,
    - ``source``: a packaged dataset (``gsm8k-test``, ``math500``, ``math-test``,
      ``math-test-4.5k``, ``asdiv``; see :data:`gem_envs_math.sources.PACKAGED`).

    ``question_key``/``answer_key`` name the fields of file and hub records;
    ``subjects``/``levels`` filter MATH problems. ``reset(idx=i)`` poses problem ``i``
    (deterministic evaluation order); otherwise problems come in shuffled epochs drawn
    from the env's own RNG (``shuffle=False``: dataset order). Envs made from the same
    source, and spawned siblings, share one copy of the data.

    >>> env = gem.make("eval:MATH500")
    >>> question, info = env.reset(idx=0)
    >>> env.step(r"$\\boxed{(3, \\frac{\\pi}{2})}$")[1]
    1.0
    """

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
        format_error_reward: float = 0.0,
        grade_timeout: float | None = None,
    ) -> None:
        if dataset is not None:
            problems: Sequence[Mapping[str, Any]] = dataset
        elif path is not None:
            problems = sources.load_local(path, question_key, answer_key)
        elif dataset_name:
            problems = sources.load_hub(dataset_name, split, question_key, answer_key)
        elif source is not None:
            problems = sources.load_packaged(source)
        else:
            raise ValueError("MathEnv needs a source: dataset=, path=, dataset_name= or source=")
        if subjects or levels:
            if not isinstance(problems, sources.Problems):
                problems = sources.Problems("dataset", problems)
            problems = sources.select(problems, subjects, levels)
        if len(problems) == 0:
            raise ValueError("MathEnv got an empty dataset")
        self.problems = problems
        # in-memory datasets keep their own keys; loaded ones are normalised
        loaded = dataset is None
        self.question_key = "problem" if loaded else question_key
        self.answer_key = "answer" if loaded else answer_key
        self.shuffle = shuffle
        self.format_error_reward = float(format_error_reward)
        self.grade_timeout = grade_timeout
        self._order: list[int] | None = None
        self._epoch_seed = 0
        self._epoch = 0
        self._position = 0
        self._current: int | None = None

    # -- problem order ----------------------------------------------------------------
    def _permutation(self, epoch_seed: int) -> list[int]:
        indices = list(range(len(self.problems)))
        if self.shuffle:
            # a private generator seeded from the env's stream: the order is a pure
            # function of one integer, so get_state stores that instead of the order
            random.Random(epoch_seed).shuffle(indices)
        return indices

    def _new_epoch(self) -> None:
        self._epoch_seed = self.rng.getrandbits(63)
        self._order = self._permutation(self._epoch_seed)
        self._position = 0

    def reset(self, seed: int | None = None, idx: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        """Pose the next problem; ``idx`` picks problem ``idx``, ``seed`` restarts the
        shuffled order from that seed."""
        super().reset(seed)
        if idx is not None:
            if not 0 <= int(idx) < len(self.problems):
                raise IndexError(f"idx={idx} is outside the dataset (0..{len(self.problems) - 1})")
            self._current = int(idx)
        else:
            if seed is not None:
                self._epoch = 0
                self._new_epoch()
            elif self._order is None or self._position >= len(self._order):
                if self._order is not None:
                    self._epoch += 1
                self._new_epoch()
            assert self._order is not None
            self._current = self._order[self._position]
            self._position += 1
        return self.question, {"idx": self._current, "epoch": self._epoch}

    @property
    def question(self) -> str:
        """The current problem's text."""
        return str(self._record()[self.question_key])

    @property
    def answer(self) -> Any:
        """The current problem's reference answer (a string, or a list of acceptable ones)."""
        return self._record()[self.answer_key]

    def _record(self) -> Mapping[str, Any]:
        if self._current is None:
            raise RuntimeError("call reset() before step()")
        return self.problems[self._current]

    # -- the single step --------------------------------------------------------------
    def step(self, action: str) -> StepResult:
        reference = self.answer
        if not isinstance(reference, (str, list)):
            reference = str(reference)
        result = grade(action if isinstance(action, str) else str(action), reference, timeout=self.grade_timeout)
        if result.correct:
            reward = 1.0
        elif result.format_error:
            reward = self.format_error_reward
        else:
            reward = 0.0
        info = {
            "correct": result.correct,
            "format_error": result.format_error,
            "extracted_answer": result.extracted,
            "grade_status": result.status,
            "reference_answer": reference,
            "idx": self._current,
        }
        return TERMINAL_STATE, reward, True, False, info

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(0, 100)}}}"

    # -- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "rng": self.rng_state(),
            "epoch": self._epoch,
            "epoch_seed": self._epoch_seed,
            "position": self._position,
            "has_order": self._order is not None,
            "current": self._current,
            "size": len(self.problems),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state["size"] != len(self.problems):
            raise ValueError(f"state is of a dataset of {state['size']} problems, this env has {len(self.problems)}")
        self.set_rng_state(state["rng"])
        self._epoch = state["epoch"]
        self._epoch_seed = state["epoch_seed"]
        self._position = state["position"]
        self._order = self._permutation(self._epoch_seed) if state["has_order"] else None
        self._current = state["current"]
