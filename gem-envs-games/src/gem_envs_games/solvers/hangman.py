"""Hangman by candidate filtering: keep the common words that fit the revealed
pattern and the letters tried, and guess the letter that splits them most evenly
(highest entropy), or the likeliest word when that is worth more."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from gem_envs_games import words
from gem_envs_games.solvers import seen

_PATTERN = re.compile(r"^Word: ([A-Z_](?: [A-Z_])*)$", re.MULTILINE)
_TRIED = re.compile(r"^Letters tried: (.*)$", re.MULTILINE)
_LEFT = re.compile(r"Turns left: (\d+)")
_FREQUENT = "ETAOINSHRDLCUMWFGYPBVKJXQZ"


def _entropy(sizes: list[int], total: int) -> float:
    return -sum(n / total * math.log(n / total) for n in sizes)


class Solver:
    """Plays from the ``Word:`` / ``Letters tried:`` lines of each observation.

    >>> from gem_envs_games.hangman import HangmanEnv
    >>> env = HangmanEnv(word_length=3, max_turns=10)
    >>> obs, info = env.reset(seed=0); solver = Solver(env); solver.reset()
    >>> len(solver.act(obs, info)) == len("\\\\boxed{}") + 1
    True
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.candidates: list[str] | None = None
        self.last_word: str | None = None

    def reset(self) -> None:
        self.candidates = None
        self.last_word = None

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        patterns, tried_lines = _PATTERN.findall(observation), _TRIED.findall(observation)
        if not patterns:
            return "\\boxed{E}"
        pattern = patterns[-1].split(" ")
        tried = set(tried_lines[-1].split()) - {"none"} if tried_lines else set()
        left = int(_LEFT.findall(observation)[-1]) if _LEFT.search(observation) else 1
        if self.candidates is None:
            self.candidates = [w.upper() for w in words.secret_words(len(pattern), self.env.hardcore)]
        wrong_word = self.last_word if self.last_word and f"{self.last_word} is not the word" in observation else None
        self.candidates = [
            w
            for w in self.candidates
            if w != wrong_word and all(p == ch if p != "_" else ch not in tried for p, ch in zip(pattern, w))
        ]
        self.last_word = None
        if not self.candidates:
            return "\\boxed{" + next((ch for ch in _FREQUENT if ch not in tried), "E") + "}"
        total = len(self.candidates)
        # one pass over the words: how many show each letter at each set of positions
        groups: Counter[tuple[str, tuple[int, ...]]] = Counter()
        for word in self.candidates:
            for letter in set(word) - tried:
                groups[letter, tuple(i for i, ch in enumerate(word) if ch == letter)] += 1
        sizes: dict[str, list[int]] = {}
        for (letter, _), n in groups.items():
            sizes.setdefault(letter, []).append(n)
        best_letter, best_gain = None, -1.0
        for letter in sorted(sizes):
            absent = total - sum(sizes[letter])
            gain = _entropy(sizes[letter] + ([absent] if absent else []), total)
            if gain > best_gain:
                best_letter, best_gain = letter, gain
        word_gain = _entropy([1, total - 1] if total > 1 else [1], total)
        if best_letter is None or left == 1 or word_gain >= best_gain:
            self.last_word = self.candidates[0]  # the most frequent word
            return f"\\boxed{{{self.last_word}}}"
        return f"\\boxed{{{best_letter}}}"
