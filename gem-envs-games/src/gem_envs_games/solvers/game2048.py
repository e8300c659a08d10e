"""2048 play by depth-2 expectimax (move, random tile, move) over a heuristic that
favours big tiles kept in one corner and free cells."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from gem_envs_games.game2048 import DIRECTIONS, merge_line
from gem_envs_games.solvers import seen

_ROW = re.compile(r"^(?: *(?:\d+|\.))+$")

Rows = tuple[tuple[int, ...], ...]


def read_board(observation: str) -> Rows:
    """The last board in ``observation`` as rows of tiles (0 for empty)."""
    blocks: list[list[str]] = []
    previous_was_row = False
    for line in observation.splitlines():
        is_row = bool(line.strip()) and bool(_ROW.match(line))
        if is_row:
            if not previous_was_row:
                blocks.append([])
            blocks[-1].append(line)
        previous_was_row = is_row
    square = [b for b in blocks if all(len(line.split()) == len(b) for line in b)]
    if not square:
        raise ValueError("no board in the observation")
    return tuple(tuple(0 if tok == "." else int(tok) for tok in line.split()) for line in square[-1])


@lru_cache(maxsize=1 << 16)
def _left(row: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(merge_line(list(row)))


def slide(board: Rows, direction: str) -> Rows:
    """``board`` after sliding ``direction`` (tuples, cached per row)."""
    if direction == "left":
        return tuple(_left(row) for row in board)
    if direction == "right":
        return tuple(_left(row[::-1])[::-1] for row in board)
    columns = tuple(zip(*board))
    moved = slide(columns, "left" if direction == "up" else "right")
    return tuple(zip(*moved))


@lru_cache(maxsize=8)
def _corner_weights(n: int) -> tuple[tuple[float, ...], ...]:
    # a snake from the top-left corner: the order in which a chain of tiles merges
    order = [[r * n + (c if r % 2 == 0 else n - 1 - c) for c in range(n)] for r in range(n)]
    return tuple(tuple(4.0 ** ((n * n - 1 - order[r][c]) / 2) for c in range(n)) for r in range(n))


@lru_cache(maxsize=1 << 14)
def evaluate(board: Rows) -> float:
    """Heuristic value: tiles weighted by their place on the corner snake, times a
    bonus for free cells."""
    n = len(board)
    weights = _corner_weights(n)
    score = 0.0
    empty = 0
    for row, w in zip(board, weights):
        for c in range(n):
            if row[c]:
                score += row[c] * w[c]
            else:
                empty += 1
    return score * (1.0 + 0.1 * empty)


def _best_after_spawn(board: Rows) -> float:
    """Expected value over the new tile, with the best reply move evaluated."""
    n = len(board)
    empty = [(r, c) for r in range(n) for c in range(n) if not board[r][c]]
    if not empty:
        return evaluate(board)
    total = 0.0
    for r, c in empty:
        for tile, p in ((2, 0.9), (4, 0.1)):
            row = (*board[r][:c], tile, *board[r][c + 1:])
            child = (*board[:r], row, *board[r + 1:])
            best = 0.0
            for d in DIRECTIONS:
                moved = slide(child, d)
                if moved != child:
                    best = max(best, evaluate(moved))
            total += p * best
    return total / len(empty)


def choose_move(board: Rows) -> str:
    """The move with the highest expectimax value (a move that changes nothing is never
    chosen while another exists)."""
    best_move, best_value = DIRECTIONS[0], -1.0
    for d in DIRECTIONS:
        moved = slide(board, d)
        if moved == board:
            continue
        value = _best_after_spawn(moved)
        if value > best_value:
            best_move, best_value = d, value
    return best_move


class Solver:
    """Heuristic 2048 player (win rates per preset are in the package's tests)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self) -> None:
        """Nothing to forget: each move is chosen from the observed board."""

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        observation = seen(observation, info)
        return f"\\boxed{{{choose_move(read_board(observation))}}}"
