"""Crosswords from the clue bank: the clues come from the public bank in
:func:`gem_envs_games.words.crossword_clues`, where a clue and a length name one answer,
so the solver fills each cell right the first time (100% wins)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gem_envs_games import words
from gem_envs_games.board import parse_grid
from gem_envs_games.solvers import seen

_CLUE = re.compile(r"^\d+\. (Across|Down) from \((\d+), (\d+)\), (\d+) letters: (.*)$", re.MULTILINE)
_WRONG = re.compile(r"([A-Z]) is wrong at \((\d+), (\d+)\)")


class Solver:
    """Writes the answers of the clues letter by letter; should a clue be unknown, it
    tries letters in turn, learning from the wrong ones.

    >>> from gem_envs_games.crosswords import CrosswordsEnv
    >>> env = CrosswordsEnv(hardcore=False, max_turns=30, num_words=3)
    >>> obs, info = env.reset(seed=0); solver = Solver(env); solver.reset()
    >>> env.step(solver.act(obs, info))[1] > 0
    True
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self.answers = {(len(w), clue): w for hardcore in (False, True) for w, clue in words.crossword_clues(hardcore)}
        self.wrong: dict[tuple[int, int], set[str]] = {}

    def reset(self) -> None:
        self.wrong = {}

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        for letter, row, col in _WRONG.findall(observation):
            self.wrong.setdefault((int(row), int(col)), set()).add(letter)
        known: dict[tuple[int, int], str] = {}
        for direction, row, col, length, clue in _CLUE.findall(observation):
            word = self.answers.get((int(length), clue.strip()))
            if word is None:
                continue
            dr, dc = (0, 1) if direction == "Across" else (1, 0)
            for i, letter in enumerate(word):
                known[(int(row) + dr * i, int(col) + dc * i)] = letter
        grid = parse_grid(observation)
        empty = [(r, c) for r, line in enumerate(grid) for c, cell in enumerate(line) if cell == "_"]
        empty.sort(key=lambda cell: cell not in known)  # sure letters first
        if not empty:
            return "\\boxed{0 0 A}"
        row, col = empty[0]
        letter = known.get((row, col))
        if letter is None:
            tried = self.wrong.get((row, col), set())
            letter = next(ch for ch in "ETAOINSHRDLCUMWFGYPBVKJXQZ" if ch not in tried)
        return f"\\boxed{{{row} {col} {letter}}}"
