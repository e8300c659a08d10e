"""Optimal sliding-puzzle play: IDA* guided by walking distance."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from gem_envs_games.fifteen_puzzle import OPPOSITE, SOURCE_OFFSET, slide
from gem_envs_games.solvers import seen

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


@cache
def walking_distance_table(n: int) -> dict[int, int]:
    """Walking distances for an ``n`` x ``n`` board: the fewest vertical moves that sort
    the tiles into their goal rows, when only each row's count of tiles per goal row
    matters (Takahashi's heuristic; the same table serves columns).

    A state packs the counts, base ``n + 1``, with the gap's row above them.

    >>> len(walking_distance_table(4))
    24964
    """
    base = n + 1
    gap_unit = base ** (n * n)
    goal = sum((n - (i == n - 1)) * base ** (i * n + i) for i in range(n)) + (n - 1) * gap_unit
    dist = {goal: 0}
    frontier, d = [goal], 0
    while frontier:
        d += 1
        following = []
        for key in frontier:
            gap_row, counts = divmod(key, gap_unit)
            for other in (gap_row - 1, gap_row + 1):
                if not 0 <= other < n:
                    continue
                for g in range(n):
                    if counts // base ** (other * n + g) % base:
                        # a tile bound for row g moves from `other` into the gap's row
                        new = key - base ** (other * n + g) + base ** (gap_row * n + g) + (other - gap_row) * gap_unit
                        if new not in dist:
                            dist[new] = d
                            following.append(new)
        frontier = following
    return dist


class _Search:
    """IDA* whose estimate is the vertical plus the horizontal walking distance. A move
    changes only one of the two, so each child costs two additions and a lookup."""

    def __init__(self, tiles: list[int]) -> None:
        self.n = n = round(len(tiles) ** 0.5)
        self.tiles = list(tiles)
        self.table = walking_distance_table(n)
        self.unit = [[(n + 1) ** (i * n + g) for g in range(n)] for i in range(n)]
        self.gap_unit = (n + 1) ** (n * n)
        self.neighbours = [
            [
                (direction, (r + dr) * n + c + dc, dr != 0)
                for direction, (dr, dc) in SOURCE_OFFSET.items()
                if 0 <= r + dr < n and 0 <= c + dc < n
            ]
            for r, c in (divmod(pos, n) for pos in range(n * n))
        ]

    def _keys(self) -> tuple[int, int]:
        n, unit = self.n, self.unit
        rows = cols = 0
        for pos, t in enumerate(self.tiles):
            r, c = divmod(pos, n)
            if t:
                rows += unit[r][(t - 1) // n]
                cols += unit[c][(t - 1) % n]
            else:
                rows += r * self.gap_unit
                cols += c * self.gap_unit
        return rows, cols

    def solve(self) -> list[str]:
        """A shortest list of moves (tile directions) to the goal."""
        self.path: list[str] = []
        gap = self.tiles.index(0)
        rows, cols = self._keys()
        bound = self.table[rows] + self.table[cols]
        while True:
            found = self._dfs(gap, 0, bound, rows, cols, None)
            if found is True:
                return self.path
            bound = found

    def _dfs(self, gap: int, g: int, bound: int, rows: int, cols: int, last: str | None) -> int | bool:
        estimate = self.table[rows] + self.table[cols]
        if g + estimate > bound:
            return g + estimate
        if estimate == 0:
            return True
        n, tiles, unit, gap_unit = self.n, self.tiles, self.unit, self.gap_unit
        gr, gc = divmod(gap, n)
        smallest = 1 << 30
        for direction, src, vertical in self.neighbours[gap]:
            if direction == OPPOSITE.get(last):
                continue
            t = tiles[src]
            sr, sc = divmod(src, n)
            if vertical:
                goal = (t - 1) // n
                new_rows, new_cols = rows + unit[gr][goal] - unit[sr][goal] + (sr - gr) * gap_unit, cols
            else:
                goal = (t - 1) % n
                new_rows, new_cols = rows, cols + unit[gc][goal] - unit[sc][goal] + (sc - gc) * gap_unit
            tiles[gap], tiles[src] = t, 0
            self.path.append(direction)
            found = self._dfs(src, g + 1, bound, new_rows, new_cols, direction)
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
        """Forget the plan of the previous episode."""
        self._plan: list[str] = []
        self._expected: list[int] | None = None

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        tiles = read_tiles(observation)
        if tiles != self._expected or not self._plan:
            self._plan = solve_tiles(tiles)
        if not self._plan:
            raise ValueError("the puzzle is already solved")
        move = self._plan.pop(0)
        rows = round(len(tiles) ** 0.5)
        slide(tiles, rows, move)
        self._expected = tiles
        return f"\\boxed{{{move}}}"
