"""Word Search by scanning: every listed word is looked up in each row and column,
forwards and backwards, so the solver never misses (100% wins)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gem_envs_games.board import parse_grid
from gem_envs_games.solvers import seen
from gem_envs_games.word_search import occurrences

_WORDS = re.compile(r"Words to find \([^)]*\): (.+)")


class Solver:
    """Marks the first word not yet found.

    >>> from gem_envs_games.word_search import WordSearchEnv
    >>> env = WordSearchEnv(hardcore=False, max_turns=20, num_words=5)
    >>> obs, info = env.reset(seed=0); solver = Solver(env); solver.reset()
    >>> env.step(solver.act(obs, info))[1]
    0.2
    """

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self) -> None:
        """Nothing to forget: each observation shows the whole puzzle."""

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        grid = [[cell.strip("[]") for cell in row] for row in parse_grid(observation)]
        listed = _WORDS.findall(observation)
        todo = [w for w in listed[-1].split(", ") if not w.startswith("[")] if listed else []
        for word in todo:
            for (r1, c1), (r2, c2) in sorted(occurrences(grid, word, backwards=True)):
                return f"\\boxed{{{r1} {c1} {r2} {c2}}}"
        return "\\boxed{0 0 0 0}"
