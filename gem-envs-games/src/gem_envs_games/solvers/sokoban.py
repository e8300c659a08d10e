"""Sokoban play: plan a shortest solution from the board in the observation, then walk it.

>>> level = read_level("# # # # # #\\n# P X _ O #\\n# # # # # #")
>>> shortest_solution(level.walls, level.goals, level.boxes, level.player)
['right', 'right']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gem_envs_games.sokoban import (
    BOX,
    BOX_ON_GOAL,
    FLOOR,
    GOAL,
    PLAYER,
    PLAYER_ON_GOAL,
    WALL,
    Cell,
    push,
    shortest_solution,
)
from gem_envs_games.solvers import seen

_SYMBOLS = {WALL, FLOOR, GOAL, BOX, BOX_ON_GOAL, PLAYER, PLAYER_ON_GOAL}


@dataclass
class Level:
    """A Sokoban position read from text."""

    walls: set[Cell]
    goals: set[Cell]
    boxes: set[Cell]
    player: Cell


def read_level(observation: str) -> Level:
    """The last board in ``observation``."""
    blocks: list[list[list[str]]] = []
    previous_was_row = False
    for line in observation.splitlines():
        tokens = line.split()
        is_row = bool(tokens) and all(t in _SYMBOLS for t in tokens)
        if is_row:
            if not previous_was_row:
                blocks.append([])
            blocks[-1].append(tokens)
        previous_was_row = is_row
    if not blocks:
        raise ValueError("no Sokoban board in the observation")
    level = Level(set(), set(), set(), (-1, -1))
    for r, row in enumerate(blocks[-1]):
        for c, sym in enumerate(row):
            cell = (r, c)
            if sym == WALL:
                level.walls.add(cell)
            if sym in (GOAL, BOX_ON_GOAL, PLAYER_ON_GOAL):
                level.goals.add(cell)
            if sym in (BOX, BOX_ON_GOAL):
                level.boxes.add(cell)
            if sym in (PLAYER, PLAYER_ON_GOAL):
                level.player = cell
    if level.player == (-1, -1) or len(level.goals) < len(level.boxes):
        raise ValueError("the board in the observation has no player or too few goals")
    # a ring of walls around the board keeps every search inside it
    rows, cols = len(blocks[-1]), max(map(len, blocks[-1]))
    for r in range(-1, rows + 1):
        level.walls.update({(r, -1), (r, cols)})
    for c in range(-1, cols + 1):
        level.walls.update({(-1, c), (rows, c)})
    return level


class Solver:
    """Plans a shortest solution and plays it, re-planning if the board differs from
    the one the plan expects."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.reset()

    def reset(self) -> None:
        """Forget the plan of the previous episode."""
        self._plan: list[str] = []
        self._expected: tuple[Cell, frozenset[Cell]] | None = None

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        level = read_level(observation)
        if (level.player, frozenset(level.boxes)) != self._expected or not self._plan:
            plan = shortest_solution(level.walls, level.goals, level.boxes, level.player)
            if not plan:
                raise ValueError("no solution from the observed board")
            self._plan = plan
        move = self._plan.pop(0)
        moved = push(level.walls, level.boxes, level.player, move)
        if moved is None:
            raise ValueError(f"the plan's next move {move!r} is blocked")
        self._expected = (moved[0], frozenset(moved[1]))
        return f"\\boxed{{{move}}}"
