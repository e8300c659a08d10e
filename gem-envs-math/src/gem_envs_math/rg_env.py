"""The reasoning-gym bridge: every offline reasoning-gym dataset as a single-turn env.

Importing this module imports reasoning-gym, so the plugin only names it as an entry
point: reasoning-gym loads when the first ``rg:`` env is made, never before.
"""

from __future__ import annotations

import functools
from typing import Any

import gem
from gem.conventions import FORMAT_ERROR
from gem.errors import install_hint

try:
    import reasoning_gym
except ImportError as exc:  # gem-core shows this message when an rg: env is made
    hint = install_hint("gem-envs-math[reasoning-gym]")
    raise ImportError(f"rg: envs need reasoning-gym; install it {hint}") from exc

from gem.core import StepResult
from gem.reward_range import graded
from gem_envs_math.env import TERMINAL_STATE
from gem_envs_math.extract import extract_final_answer
from gem_envs_math.pool import shared_pool

#: reasoning-gym answers can be whole grids or move lists: allow longer answers than math
MAX_ANSWER_CHARS = 50_000
_SCORE = "gem_envs_math.rg_score:score"


@functools.lru_cache(maxsize=256)
def _dataset(name: str, size: int, seed: int) -> Any:
    # items are generated on access from (seed, index): the object itself is cheap to share
    return reasoning_gym.create_dataset(name, size=size, seed=seed)


class ReasoningGymEnv(gem.Env):
    """One reasoning-gym dataset as a single-turn env, scored by the dataset's own
    ``score_answer`` on the response's final answer (last ``\\boxed{}``, or an
    ``<answer>`` tag). The reward is the score (1.0 right, partial credit where the
    dataset gives it); ``format_error_reward`` when no final answer is found.

    Problems come in epochs of ``size``: each epoch is the dataset generated from a seed
    drawn from the env's RNG (mixed with ``seed``), so ``reset(seed=s)`` is reproducible
    and the supply is endless. ``reset(idx=i)`` poses item ``i`` of the fixed dataset
    ``create_dataset(name, size=size, seed=seed)`` (the reference package's dataset).
    Scoring runs in the supervised worker pool, bounded by ``grade_timeout``.

    >>> env = gem.make("rg:leg_counting")
    >>> question, info = env.reset(idx=0)
    >>> env.step(rf"\\boxed{{{env.answer}}}")[1]
    1.0
    """

    #: rewards lie in [min(0, format_error_reward), 1]; gem.Env turns any other into a grading failure
    reward_range = graded

    def __init__(
        self,
        name: str,
        size: int = 500,
        seed: int = 42,
        format_error_reward: float = 0.0,
        grade_timeout: float | None = None,
    ) -> None:
        if name not in reasoning_gym.factory.DATASETS:
            known = ", ".join(sorted(reasoning_gym.factory.DATASETS))
            raise ValueError(f"reasoning-gym has no dataset {name!r}; known: {known}")
        if size < 1:
            raise ValueError(f"size must be positive, got {size}")
        self.name, self.size, self.seed = name, int(size), int(seed)
        self.format_error_reward = float(format_error_reward)
        self.grade_timeout = grade_timeout
        self._epoch_seed: int | None = None
        self._position = 0
        self._current: tuple[int, int] | None = None  # (dataset seed, index)
        self.entry: dict[str, Any] | None = None

    def reset(self, seed: int | None = None, idx: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        """Pose the next problem (``idx``: item ``idx`` of the fixed dataset)."""
        super().reset(seed)
        if idx is not None:
            if not 0 <= int(idx) < self.size:
                raise IndexError(f"idx={idx} is outside the dataset (0..{self.size - 1})")
            self._current = (self.seed, int(idx))
        else:
            if seed is not None or self._epoch_seed is None or self._position >= self.size:
                self._epoch_seed = (self.seed + self.rng.getrandbits(31)) % 2**31
                self._position = 0
            self._current = (self._epoch_seed, self._position)
            self._position += 1
        self.entry = self._item()
        return str(self.entry["question"]), {"dataset": self._source()}

    def _item(self) -> dict[str, Any] | None:
        """The dataset item ``self._current`` names."""
        if self._current is None:
            return None
        return _dataset(self.name, self.size, self._current[0])[self._current[1]]

    def _source(self) -> str:
        """The reasoning-gym dataset whose ``score_answer`` grades the current item."""
        return self.name

    @property
    def answer(self) -> str | None:
        """The dataset's reference answer for the current problem."""
        return None if self.entry is None else self.entry.get("answer")

    def step(self, action: str) -> StepResult:
        if self.entry is None or self._current is None:
            raise RuntimeError("call reset() before step()")
        answer = extract_final_answer(action if isinstance(action, str) else str(action))
        info: dict[str, Any] = {"extracted_answer": answer, "reference_answer": self.answer, "dataset": self._source()}
        if answer is None:
            info.update(correct=False, **{FORMAT_ERROR: True}, grade_status="no_answer")
            return TERMINAL_STATE, self.format_error_reward, True, True, info
        if len(answer) > MAX_ANSWER_CHARS:
            info.update(correct=False, **{FORMAT_ERROR: False}, grade_status="too_long", extracted_answer=answer[:100])
            return TERMINAL_STATE, 0.0, True, True, info
        outcome = shared_pool("reasoning_gym").call(
            _SCORE, self._source(), self.size, self._current[0], answer, self.entry, timeout=self.grade_timeout
        )
        status = outcome.status
        score = outcome.value if status == "ok" else 0.0
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= score <= 1.0:
            # a scorer the answer tampered with: a grading failure, never a reward (gem.reward_range)
            info["grade_error"] = f"the scorer returned {str(score)[:100]!r}, not a score in [0, 1]"
            status, score = "invalid_score", 0.0
        score = float(score)
        info.update(correct=score >= 1.0, **{FORMAT_ERROR: False}, grade_status=status, score=score)
        return TERMINAL_STATE, score, True, True, info

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(0, 100)}}}"

    def get_state(self) -> dict[str, Any]:
        return {
            "rng": self.rng_state(),
            "epoch_seed": self._epoch_seed,
            "position": self._position,
            "current": list(self._current) if self._current else None,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.set_rng_state(state["rng"])
        self._epoch_seed, self._position = state["epoch_seed"], state["position"]
        self._current = tuple(state["current"]) if state["current"] else None  # type: ignore[assignment]
        self.entry = self._item()
