"""2048: slide and merge tiles until one reaches the target tile.

>>> env = Game2048Env(target_tile=64, max_turns=50)
>>> obs, info = env.reset(seed=0)
>>> sum(tile > 0 for row in env.board for tile in row)
2

Rewards (GEM's): each move that raises the largest tile earns its progress on a log
scale, ``(log2(new max) - log2(old max)) / (log2(target) - log2(starting max))``,
so reaching the target has earned 1.0 in all; a move that changes nothing earns 0;
a reply without a readable ``\\boxed{direction}`` earns -0.1 and ends the episode.

A new tile appears after every move, a 2 or (one time in ten) a 4, so after ``t``
turns the tiles add up to at most ``8 + 4 t``. GEM's ``hard`` (512 in 50 turns) and
``extreme-hard`` (2048 in 100 turns) presets therefore cannot be won; they are kept
for compatibility and score progress through the dense reward.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from gem_envs_games.base import DirectionGame, Outcome, at_least, reference_alias

#: (target_tile, max_turns) drawn per episode when a setting is None (GEM's random preset)
RANDOM_PRESETS = ((16, 20), (32, 30), (64, 50))
DIRECTIONS = ("up", "down", "left", "right")

Board = list[list[int]]


def merge_line(line: list[int]) -> list[int]:
    """Slide one line towards its start, merging equal neighbours once.

    >>> merge_line([2, 2, 2, 0]), merge_line([4, 0, 4, 8])
    ([4, 2, 0, 0], [8, 8, 0, 0])
    """
    tiles = [t for t in line if t]
    out: list[int] = []
    i = 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(2 * tiles[i])
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (len(line) - len(out))


# A 4-tile line takes few distinct values in a game, so the lines below are looked up
# rather than recomputed: every move slides four lines, and the game-over test up to 16.
@lru_cache(maxsize=1 << 16)
def _merged(line: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(merge_line(list(line)))


@lru_cache(maxsize=1 << 16)
def _merged_backwards(line: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(merge_line(list(line[::-1]))[::-1])


def slide_board(board: Board, direction: str) -> Board:
    """The board after sliding every tile ``direction`` (no new tile)."""
    if direction == "left":
        return [list(_merged(tuple(row))) for row in board]
    if direction == "right":
        return [list(_merged_backwards(tuple(row))) for row in board]
    merge = _merged if direction == "up" else _merged_backwards
    return [list(row) for row in zip(*map(merge, zip(*board)))]


@lru_cache(maxsize=1 << 12)
def _render_row(row: tuple[int, ...]) -> str:
    return "".join(f"{t if t else '.':>5}" for t in row)


def render_board(board: Board) -> str:
    """One line per row, tiles right-aligned in 5 characters, ``.`` for empty."""
    return "\n".join([_render_row(tuple(row)) for row in board])


class Game2048Env(DirectionGame):
    """2048 on a ``board_size`` square: reach ``target_tile`` within ``max_turns`` turns.

    With ``target_tile`` or ``max_turns`` None, each episode draws one of
    :data:`RANDOM_PRESETS` (all winnable in principle).
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    max_tile_achieved = reference_alias("best")
    init_max_tile_achieved = reference_alias("start_max")

    format_error = "no move found. Answer like \\boxed{left}."
    directions = DIRECTIONS

    def __init__(self, target_tile: int | None = 2048, max_turns: int | None = 1000, board_size: int = 4) -> None:
        if target_tile is not None and (target_tile < 8 or target_tile & (target_tile - 1)):
            raise ValueError(f"target_tile must be a power of two, at least 8; got {target_tile}")
        at_least("max_turns", max_turns, 1)
        at_least("board_size", board_size, 2)
        self._random = target_tile is None or max_turns is None
        self.target_tile, self.max_turns = RANDOM_PRESETS[0] if self._random else (target_tile, max_turns)
        self.board_size = board_size
        self.board: Board = [[0] * board_size for _ in range(board_size)]
        self.start_max = self.best = 2

    # -- the episode ------------------------------------------------------------------
    def new_episode(self) -> str:
        if self._random:
            self.target_tile, self.max_turns = self.rng.choice(RANDOM_PRESETS)
        self.board = [[0] * self.board_size for _ in range(self.board_size)]
        self._spawn()
        self._spawn()
        self.start_max = self.best = max(map(max, self.board))
        return (
            f"You are playing 2048 on a {self.board_size}x{self.board_size} board.\n"
            f"Reach a {self.target_tile} tile within {self.max_turns} turns.\n"
            "Each turn, slide all tiles up, down, left or right: tiles move as far as they can, "
            "and two equal tiles that meet merge into one tile of their sum (once per move).\n"
            "After every move that changes the board, a new 2 (or sometimes a 4) appears in a "
            "random empty cell. A move that changes nothing still uses a turn.\n"
            "Answer with the direction in \\boxed{}, e.g. \\boxed{left}."
        )

    def _spawn(self) -> None:
        n = self.board_size
        empty = [(r, c) for r in range(n) for c in range(n) if not self.board[r][c]]
        if empty:
            r, c = self.rng.choice(empty)
            self.board[r][c] = 2 if self.rng.random() < 0.9 else 4

    def play(self, direction: str) -> str | Outcome:
        moved = slide_board(self.board, direction)
        if moved == self.board:
            return f"sliding {direction} changes nothing."
        self.board = moved
        reward = 0.0
        top = min(max(map(max, moved)), self.target_tile)
        if top > self.best:
            span = math.log2(self.target_tile) - math.log2(self.start_max)
            reward = (math.log2(top) - math.log2(self.best)) / span
            self.best = top
        self._spawn()
        feedback = f"slid {direction}; largest tile {max(map(max, self.board))}."
        if self.best >= self.target_tile:
            return Outcome.win(f"{feedback} You reached {self.target_tile}!\n\n{render_board(self.board)}", reward)
        # a board with an empty cell always has a move (some tile can slide into it)
        if all(map(all, self.board)) and all(slide_board(self.board, d) == self.board for d in DIRECTIONS):
            return Outcome.loss(f"{feedback} No move is left: game over.\n\n{render_board(self.board)}", reward)
        return Outcome(feedback, reward) if reward else feedback

    def last_turn_note(self) -> str:
        return f" That was the last turn.\n\n{render_board(self.board)}"

    def task_suffix(self) -> str:
        return f"Board:\n{render_board(self.board)}\nTurns left: {self.turns_left}. Enter your move."

    # -- state ------------------------------------------------------------------------
    def game_state(self) -> dict[str, Any]:
        return {
            "target_tile": self.target_tile,
            "board": [list(row) for row in self.board],
            "start_max": self.start_max,
            "best": self.best,
        }

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.target_tile = state["target_tile"]
        self.board = [list(row) for row in state["board"]]
        self.board_size = len(self.board)
        self.start_max, self.best = state["start_max"], state["best"]


def register(registry: Any) -> None:
    """Register GEM's 2048 ids."""
    entry = "gem_envs_games.game2048:Game2048Env"
    registry.register("game:Game2048-v0", entry)
    registry.register("game:Game2048-v0-easy", entry, target_tile=64, max_turns=50)
    registry.register("game:Game2048-v0-hard", entry, target_tile=512, max_turns=50)
    registry.register("game:Game2048-v0-extreme-hard", entry, target_tile=2048, max_turns=100)
    registry.register("game:Game2048-v0-random", entry, target_tile=None, max_turns=None)
