"""Optimal sliding-puzzle play: IDA* with Manhattan distance plus linear conflicts."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from gem_envs_games.fifteen_puzzle import OPPOSITE, SOURCE_OFFSET, slide

_ROW = re.compile(r"^ ?(?:__|\d{1,2})(?: +(?:__|\d{1,2}))+$")


def read_tiles(observation: str) -> list[int]:
    """The last board in ``observation``, row-major, 0 for the gap."""
    blocks: list[list[str]] = []
    previous_was_row = False
    for line in observation.splitlines():
        is_row = bool(_ROW.match(line))
        if is_row:
            if not previous_was_row:
                blocks.append([])
            blocks[-1].append(line)
        previous_was_row = is_row
    if not blocks:
        raise ValueError("no board in the observation")
    rows = blocks[-1]
    tiles = [0 if cell == "__" else int(cell) for line in rows for cell in line.split()]
    if len(tiles) != len(rows) ** 2 or sorted(tiles) != list(range(len(tiles))):
        raise ValueError(f"the board in the observation is not a square puzzle: {rows}")
    return tiles


@lru_cache(maxsize=None)
def _line_cost(goal_order: tuple[int, ...]) -> int:
    """Extra moves forced by tiles that sit in their goal line in the wrong order:
    every tile outside a longest increasing run must step out of the line and back."""
    longest = [1] * len(goal_order)
    for i in range(len(goal_order)):
        for j in range(i):
            if goal_order[j] < goal_order[i]:
                longest[i] = max(longest[i], longest[j] + 1)
    return 2 * (len(goal_order) - max(longest, default=0))


class _Search:
    def __init__(self, tiles: list[int]) -> None:
        self.n = n = int(round(len(tiles) ** 0.5))
        self.tiles = list(tiles)
        self.neighbours = []
        for pos in range(n * n):
            r, c = divmod(pos, n)
            moves = []
            for direction, (dr, dc) in SOURCE_OFFSET.items():
                if 0 <= r + dr < n and 0 <= c + dc < n:
                    moves.append((direction, (r + dr) * n + c + dc))
            self.neighbours.append(moves)

    def row_cost(self, r: int) -> int:
        n = self.n
        return _line_cost(tuple((t - 1) % n for t in self.tiles[r * n : r * n + n] if t and (t - 1) // n == r))

    def col_cost(self, c: int) -> int:
        n = self.n
        return _line_cost(tuple((t - 1) // n for t in self.tiles[c::n] if t and (t - 1) % n == c))

    def heuristic(self) -> int:
        n = self.n
        manhattan = 0
        for pos, t in enumerate(self.tiles):
            if t:
                manhattan += abs(pos // n - (t - 1) // n) + abs(pos % n - (t - 1) % n)
        return manhattan + sum(self.row_cost(i) + self.col_cost(i) for i in range(n))

    def solve(self) -> list[str]:
        """A shortest list of moves (tile directions) to the goal."""
        self.path: list[str] = []
        gap = self.tiles.index(0)
        bound = self.heuristic()
        while True:
            found = self._dfs(gap, 0, bound, self.heuristic(), None)
            if found is True:
                return self.path
            bound = found

    def _dfs(self, gap: int, g: int, bound: int, h: int, last: str | None) -> int | bool:
        f = g + h
        if f > bound:
            return f
        if h == 0:
            return True
        n, tiles = self.n, self.tiles
        smallest = 1 << 30
        for direction, src in self.neighbours[gap]:
            if last is not None and direction == OPPOSITE[last]:
                continue
            t = tiles[src]
            goal_r, goal_c = divmod(t - 1, n)
            gr, gc = divmod(gap, n)
            sr, sc = divmod(src, n)
            vertical = gc == sc
            # only the tile's Manhattan term and the two lines it leaves/enters change
            before = self.row_cost(sr) + self.row_cost(gr) if vertical else self.col_cost(sc) + self.col_cost(gc)
            tiles[gap], tiles[src] = t, 0
            after = self.row_cost(sr) + self.row_cost(gr) if vertical else self.col_cost(sc) + self.col_cost(gc)
            delta_md = (abs(gr - goal_r) + abs(gc - goal_c)) - (abs(sr - goal_r) + abs(sc - goal_c))
            self.path.append(direction)
            found = self._dfs(src, g + 1, bound, h + delta_md + after - before, direction)
            if found is True:
                return True
            self.path.pop()
            tiles[src], tiles[gap] = t, 0
            smallest = min(smallest, found)
        return smallest


def solve_tiles(tiles: list[int]) -> list[str]:
    """A shortest move list solving ``tiles`` (row-major, 0 for the gap).

    >>> solve_tiles([1, 2, 0, 3])
    ['left']
    """
    return _Search(tiles).solve()


class Solver:
    """Plays the sliding puzzle along an optimal plan, re-planning if the board
    differs from the one the plan expects."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.reset()

    def reset(self) -> None:
        self._plan: list[str] = []
        self._expected: list[int] | None = None

    def act(self, observation: str) -> str:
        tiles = read_tiles(observation)
        if tiles != self._expected or not self._plan:
            self._plan = solve_tiles(tiles)
        if not self._plan:
            raise ValueError("the puzzle is already solved")
        move = self._plan.pop(0)
        rows = int(round(len(tiles) ** 0.5))
        slide(tiles, rows, move)
        self._expected = tiles
        return f"\\boxed{{{move}}}"
