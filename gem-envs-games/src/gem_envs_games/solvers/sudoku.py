"""Sudoku play: solve the grid read from the observation, then place one digit per turn."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gem_envs_games.solvers import seen
from gem_envs_games.sudoku import Grid, solve

_ROW = re.compile(r"^\s*(\d+) \|(.*)\|\s*$")


def read_grid(observation: str) -> Grid:
    """The last grid in ``observation`` (0 for an empty cell)."""
    grids: list[Grid] = []
    expected = 1
    for line in observation.splitlines():
        match = _ROW.match(line)
        if not match:
            continue
        row = int(match.group(1))
        if row == 1:
            grids.append([])
        elif row != expected or not grids:
            continue
        cells = [tok for tok in match.group(2).split() if tok != "|"]
        grids[-1].append([0 if set(tok) == {"."} else int(tok) for tok in cells])
        expected = row + 1
    if not grids or len(grids[-1]) != len(grids[-1][0]):
        raise ValueError("no complete grid in the observation")
    return grids[-1]


class Solver:
    """Fills one cell per turn with the digit of the puzzle's unique solution, so it
    needs exactly as many turns as there are empty cells."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self) -> None:
        """Nothing to forget: the solution is recomputed from each observation."""

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        grid = read_grid(observation)
        solutions = solve(grid)
        if not solutions:
            raise ValueError("the grid in the observation has no solution")
        for r, row in enumerate(grid):
            for c, digit in enumerate(row):
                if not digit:
                    return f"\\boxed{{{r + 1} {c + 1} {solutions[0][r][c]}}}"
        raise ValueError("the grid is already full")
