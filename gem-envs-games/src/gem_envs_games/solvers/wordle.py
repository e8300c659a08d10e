"""Wordle by candidate filtering: keep the common words consistent with every
feedback so far and guess the one expected to split them best."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from gem_envs_games import words
from gem_envs_games.solvers import seen
from gem_envs_games.wordle import feedback

_MARKS = re.compile(r"([A-Z]+) -> ((?:[GYX] ?)+)")
#: above this many candidates, rank guesses by letter frequency instead of entropy
ENTROPY_LIMIT = 150


@lru_cache(maxsize=16)
def _opening(length: int) -> str:
    return _by_letter_frequency(tuple(w.upper() for w in words.secret_words(length)))


def _by_letter_frequency(candidates: tuple[str, ...]) -> str:
    """The candidate whose distinct letters (and their places) are most common."""
    present = Counter(ch for word in candidates for ch in set(word))
    placed = Counter((i, ch) for word in candidates for i, ch in enumerate(word))
    return max(candidates, key=lambda w: sum(present[ch] for ch in set(w)) + sum(placed[p] for p in enumerate(w)))


def _by_entropy(candidates: list[str]) -> str:
    """The candidate whose feedback pattern is the most uncertain (most informative)."""
    total = len(candidates)

    def entropy(guess: str) -> float:
        counts = Counter(feedback(secret, guess) for secret in candidates)
        return -sum(n / total * math.log(n / total) for n in counts.values())

    return max(candidates, key=entropy)


class Solver:
    """Guesses only words that could still be the secret.

    >>> from gem_envs_games.wordle import WordleEnv
    >>> env = WordleEnv(word_length=5, max_turns=25)
    >>> obs, info = env.reset(seed=0); solver = Solver(env); solver.reset()
    >>> len(solver.act(obs, info)) == len("\\\\boxed{}") + 5
    True
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.candidates: list[str] | None = None

    def reset(self) -> None:
        self.candidates = None

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        length = self.env.word_length
        if self.candidates is None:
            self.candidates = [w.upper() for w in words.secret_words(length)]
        for guess, marks in _MARKS.findall(observation):
            marks = marks.replace(" ", "")
            if len(guess) == length == len(marks):
                self.candidates = [w for w in self.candidates if w != guess and feedback(w, guess) == marks]
        if not self.candidates:  # the secret is outside the list the solver knows
            self.candidates = [w.upper() for w in words.secret_words(length, hardcore=True)]
        if len(self.candidates) == len(words.secret_words(length)):
            choice = _opening(length)
        elif len(self.candidates) > ENTROPY_LIMIT:
            choice = _by_letter_frequency(tuple(self.candidates))
        else:
            choice = _by_entropy(self.candidates)
        return f"\\boxed{{{choice}}}"
