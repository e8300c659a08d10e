"""Mastermind by consistent guesses: every guess could still be the code, and among
few candidates the one whose worst-case answer leaves the fewest (Knuth's minimax,
restricted to the candidates)."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from gem_envs_games.mastermind import score
from gem_envs_games.solvers import seen

_FEEDBACK = re.compile(r"(\d+) black, (\d+) white")
#: above this many candidates, guess the first one instead of scoring every pair
MINIMAX_LIMIT = 150


def _distinct_score(code: tuple[int, ...], guess: tuple[int, ...]) -> tuple[int, int]:
    """:func:`score` for codes without repeated digits, several times faster."""
    black = sum(a == b for a, b in zip(code, guess))
    return black, len(set(code).intersection(guess)) - black


class Solver:
    """Keeps the codes consistent with every answer so far.

    >>> from gem_envs_games.mastermind import MastermindEnv
    >>> env = MastermindEnv(code_length=2, num_numbers=6, max_turns=10)
    >>> obs, info = env.reset(seed=0); solver = Solver(env); solver.reset()
    >>> solver.act(obs, info)
    '\\\\boxed{1 2}'
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.candidates: list[tuple[int, ...]] | None = None
        self.last: tuple[int, ...] | None = None

    def reset(self) -> None:
        self.candidates = self.last = None

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        if self.candidates is None:
            digits = range(1, self.env.num_numbers + 1)
            length = self.env.code_length
            if self.env.duplicate_numbers:
                self.candidates = list(itertools.product(digits, repeat=length))
            else:
                self.candidates = list(itertools.permutations(digits, length))
        answer = _FEEDBACK.search(observation)
        if self.last is not None and answer is not None:
            pegs = (int(answer.group(1)), int(answer.group(2)))
            self.candidates = [c for c in self.candidates if c != self.last and self._score(c, self.last) == pegs]
        self.last = self._choose()
        return "\\boxed{" + " ".join(map(str, self.last)) + "}"

    def _score(self, code: tuple[int, ...], guess: tuple[int, ...]) -> tuple[int, int]:
        if self.env.duplicate_numbers or len(set(guess)) < len(guess):
            return score(code, guess)
        return _distinct_score(code, guess)

    def _choose(self) -> tuple[int, ...]:
        candidates = self.candidates or [(1,) * self.env.code_length]
        if len(candidates) > MINIMAX_LIMIT or len(candidates) <= 2:
            return candidates[0]

        def worst_case(guess: tuple[int, ...]) -> int:
            return max(Counter(self._score(code, guess) for code in candidates).values())

        return min(candidates, key=worst_case)
