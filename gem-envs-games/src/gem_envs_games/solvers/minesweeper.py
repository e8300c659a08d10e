"""Minesweeper by deduction, then by odds: reveal a cell that the numbers prove safe;
when none is, reveal the cell least likely to hide a mine, with the odds counted
exactly over every mine layout that fits the numbers and the mine total."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from math import comb
from typing import Any

from gem_envs_games.board import parse_grid
from gem_envs_games.minesweeper import neighbours
from gem_envs_games.solvers import seen

Cell = tuple[int, int]
#: a frontier component with more cells than this is judged by local odds only
EXACT_LIMIT = 24


class Solver:
    """Never flags (flags cost turns and the game does not need them).

    >>> from gem_envs_games.minesweeper import MinesweeperEnv
    >>> env = MinesweeperEnv(rows=5, cols=5, num_mines=5, max_turns=25)
    >>> obs, info = env.reset(seed=0); solver = Solver(env); solver.reset()
    >>> solver.act(obs, info)
    '\\\\boxed{reveal 2 2}'
    """

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self) -> None:
        """Nothing to forget: each observation shows the whole board."""

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        grid = parse_grid(observation)
        rows, cols = self.env.rows, self.env.cols
        if len(grid) != rows or any(len(line) != cols for line in grid):
            return f"\\boxed{{reveal {rows // 2} {cols // 2}}}"
        hidden = {(r, c) for r in range(rows) for c in range(cols) if not grid[r][c].isdigit()}
        if len(hidden) == rows * cols:
            return f"\\boxed{{reveal {rows // 2} {cols // 2}}}"
        r, c = self._choose(grid, hidden)
        return f"\\boxed{{reveal {r} {c}}}"

    def _choose(self, grid: list[list[str]], hidden: set[Cell]) -> Cell:
        rows, cols = len(grid), len(grid[0])
        constraints: list[tuple[frozenset[Cell], int]] = []
        for r in range(rows):
            for c in range(cols):
                if grid[r][c].isdigit():
                    around = frozenset(n for n in neighbours(r, c, rows, cols) if n in hidden)
                    if around:
                        constraints.append((around, int(grid[r][c])))
        odds = mine_odds(constraints, hidden, self.env.num_mines)
        # ties go to cells with the fewest neighbours (corners, edges): they open areas more often
        return min(sorted(hidden), key=lambda cell: (round(odds[cell], 9), len(neighbours(*cell, rows, cols))))


def mine_odds(constraints: list[tuple[frozenset[Cell], int]], hidden: set[Cell], mines: int) -> dict[Cell, float]:
    """The probability that each hidden cell holds a mine, given ``constraints``
    (cells, mines among them) and the total number of ``mines``, counting every
    consistent layout once."""
    frontier = set().union(*(cells for cells, _ in constraints)) if constraints else set()
    others = [cell for cell in hidden if cell not in frontier]
    # per component: {mines used: (layouts, {cell: layouts with a mine there})}
    tables = [_component_table(comp, constraints) for comp in _components(frontier, constraints)]
    if any(table is None for table in tables):
        return _local_odds(constraints, hidden, mines)
    # combine components: ways[k] = layouts of the whole frontier using k mines
    ways: dict[int, int] = {0: 1}
    for table in tables:
        merged: dict[int, int] = {}
        for k, n in ways.items():
            for used, (count, _) in table.items():
                merged[k + used] = merged.get(k + used, 0) + n * count
        ways = merged
    weight = {k: n * comb(len(others), mines - k) for k, n in ways.items() if 0 <= mines - k <= len(others)}
    total = sum(weight.values())
    if total == 0:
        return _local_odds(constraints, hidden, mines)
    odds: dict[Cell, float] = {}
    for i, table in enumerate(tables):
        # layouts of the other components, by mines used
        rest: dict[int, int] = {0: 1}
        for j, other in enumerate(tables):
            if j != i:
                merged = {}
                for k, n in rest.items():
                    for used, (count, _) in other.items():
                        merged[k + used] = merged.get(k + used, 0) + n * count
                rest = merged
        for used, (_count, per_cell) in table.items():
            factor = sum(
                n * comb(len(others), mines - used - k)
                for k, n in rest.items()
                if 0 <= mines - used - k <= len(others)
            )
            for cell, n in per_cell.items():
                odds[cell] = odds.get(cell, 0.0) + n * factor / total
    expected_frontier = sum(k * w for k, w in weight.items()) / total
    other_odds = (mines - expected_frontier) / len(others) if others else 0.0
    for cell in hidden:
        odds.setdefault(cell, other_odds if cell in others else 0.0)
    return odds


def _components(frontier: set[Cell], constraints: list[tuple[frozenset[Cell], int]]) -> Iterator[list[Cell]]:
    """Groups of frontier cells linked through shared constraints."""
    left = set(frontier)
    while left:
        stack, comp = [left.pop()], []
        while stack:
            cell = stack.pop()
            comp.append(cell)
            for cells, _ in constraints:
                if cell in cells:
                    linked = cells & left
                    left -= linked
                    stack.extend(linked)
        yield sorted(comp)


def _component_table(
    comp: list[Cell], constraints: list[tuple[frozenset[Cell], int]]
) -> dict[int, tuple[int, dict[Cell, int]]] | None:
    """Every mine layout of ``comp`` that satisfies its constraints, tallied by the
    number of mines used; None when the component is too large to enumerate."""
    if len(comp) > EXACT_LIMIT:
        return None
    index = {cell: i for i, cell in enumerate(comp)}
    local = [([index[c] for c in cells], need) for cells, need in constraints if cells & set(comp)]
    watching: list[list[int]] = [[] for _ in comp]
    for k, (cells, _) in enumerate(local):
        for i in cells:
            watching[i].append(k)
    assigned: list[int | None] = [None] * len(comp)
    table: dict[int, tuple[int, dict[Cell, int]]] = {}

    def feasible(k: int) -> bool:
        cells, need = local[k]
        mines = sum(assigned[i] == 1 for i in cells)
        open_ = sum(assigned[i] is None for i in cells)
        return mines <= need <= mines + open_

    def search(i: int) -> None:
        if i == len(comp):
            used = sum(v == 1 for v in assigned)
            count, per_cell = table.get(used, (0, {}))
            for j, v in enumerate(assigned):
                if v == 1:
                    per_cell[comp[j]] = per_cell.get(comp[j], 0) + 1
            table[used] = (count + 1, per_cell)
            return
        for value in (0, 1):
            assigned[i] = value
            if all(feasible(k) for k in watching[i]):
                search(i + 1)
        assigned[i] = None

    search(0)
    return table


def _local_odds(constraints: list[tuple[frozenset[Cell], int]], hidden: set[Cell], mines: int) -> dict[Cell, float]:
    """A rough estimate when exact counting is too costly: each cell's worst ratio of
    mines to hidden cells among the numbers around it."""
    density = mines / len(hidden) if hidden else 0.0
    odds = dict.fromkeys(hidden, density)
    seen: set[Cell] = set()
    for cells, need in constraints:
        for cell in cells:
            ratio = need / len(cells)
            odds[cell] = max(odds[cell], ratio) if cell in seen else ratio
            seen.add(cell)
    return odds
