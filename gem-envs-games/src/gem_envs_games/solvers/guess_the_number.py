"""Binary search for Guess the Number: always wins within ``ceil(log2(range + 1))`` turns."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gem_envs_games.solvers import seen

_HINT = re.compile(r"The number is (higher|lower) than (-?\d+)")


class Solver:
    """Halves the interval the hints leave open.

    >>> from gem_envs_games.guess_the_number import GuessTheNumberEnv
    >>> env = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=4)
    >>> obs, info = env.reset(seed=0); solver = Solver(env); solver.reset()
    >>> solver.act(obs, info)
    '\\\\boxed{5}'
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.low: int | None = None
        self.high: int | None = None

    def reset(self) -> None:
        self.low = self.high = None

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        if self.low is None or self.high is None:
            self.low, self.high = self.env.min_number, self.env.max_number
        hint = _HINT.search(observation)
        if hint is not None:
            guess = int(hint.group(2))
            if hint.group(1) == "higher":
                self.low = max(self.low, guess + 1)
            else:
                self.high = min(self.high, guess - 1)
        return f"\\boxed{{{(self.low + self.high) // 2}}}"
