"""Minesweeper: reveal every safe cell without touching a mine.

>>> env = MinesweeperEnv(rows=5, cols=5, num_mines=5, max_turns=25)
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{reveal 2 2}")
>>> reward > 0 and not terminated
True

The first reveal never hits a mine: mines are laid after it, away from its 3x3
neighbourhood (from a layout seed drawn at reset, so a seed fixes the episode).
Revealing a 0 opens its neighbours, as usual.

Rewards (GEM's): each reveal earns the fraction of all safe cells it opened (a cleared
board has earned 1.0 in total); hitting a mine ends the episode with 0; flags and
invalid moves (off the board, already revealed, unknown command) earn 0; a reply
without ``\\boxed{reveal R C}`` or ``\\boxed{flag R C}`` ends the episode with -0.1.
The game is won when every safe cell is revealed; flags are only notes.
"""

from __future__ import annotations

import random
import re
from collections import deque
from functools import lru_cache
from typing import Any

from gem_envs_games.base import Outcome, TurnGame, reference_alias
from gem_envs_games.board import render_grid

_MOVE = re.compile(r"^\s*([a-zA-Z]+)[\s,:(\[]+(\d{1,6})[\s,]+(\d{1,6})[\s)\]]*$")
MINE = -1
HIDDEN, FLAG = ".", "F"
#: how a revealed cell is drawn, by its count (index -1: a mine)
_SHOWN = "012345678*"


def parse_move(text: str) -> tuple[str, int, int] | None:
    """``(command, row, col)`` from e.g. ``"reveal 3 2"`` or ``"flag (3, 2)"``.

    >>> parse_move("Reveal 3 2"), parse_move("flag (0, 4)"), parse_move("3 2")
    (('reveal', 3, 2), ('flag', 0, 4), None)
    """
    match = _MOVE.match(text)
    if match is None:
        return None
    return match.group(1).lower(), int(match.group(2)), int(match.group(3))


def neighbours(row: int, col: int, rows: int, cols: int) -> list[tuple[int, int]]:
    """The up to 8 cells around ``(row, col)`` inside a ``rows`` x ``cols`` board."""
    return [
        (r, c)
        for r in range(max(0, row - 1), min(rows, row + 2))
        for c in range(max(0, col - 1), min(cols, col + 2))
        if (r, c) != (row, col)
    ]


@lru_cache(maxsize=32)
def _neighbour_table(rows: int, cols: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """:func:`neighbours` of every cell, row-major (index ``r * cols + c``), computed once
    per board size: the game looks them up on every reveal."""
    return tuple(tuple(neighbours(r, c, rows, cols)) for r in range(rows) for c in range(cols))


class MinesweeperEnv(TurnGame):
    """Minesweeper on a ``rows`` x ``cols`` board with ``num_mines`` mines.

    With any setting None (GEM's random preset) every episode draws a square board of
    side 5-10 with a fifth of its cells mined and one turn per cell, enough to reveal
    every safe cell one by one.
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    grid = reference_alias("counts")  # -1 for a mine, else the count of mines around, as the reference
    #: whether the next reveal is the first (the mines are laid then); with no mines to lay, too
    first_reveal = property(lambda self: self.revealed_count == 0)

    format_error = "no command like \\boxed{reveal R C} found."

    def __init__(
        self,
        rows: int | None = 8,
        cols: int | None = 8,
        num_mines: int | None = 10,
        max_turns: int | None = 20,
    ) -> None:
        self._random = rows is None or cols is None or num_mines is None or max_turns is None
        if not self._random:
            if rows < 1 or cols < 1 or max_turns < 1:
                raise ValueError("rows, cols and max_turns must be at least 1")
            if not 0 <= num_mines <= rows * cols - 9:
                raise ValueError(f"num_mines must be 0..{rows * cols - 9} (the first reveal keeps 3x3 cells clear)")
        self.rows, self.cols, self.num_mines, self.max_turns = (
            (5, 5, 5, 25) if self._random else (rows, cols, num_mines, max_turns)
        )
        self.layout_seed = 0
        self.mines: list[list[int]] = []  # (row, col) pairs, empty until the first reveal
        self.counts: list[list[int]] = []  # MINE or the number of mines around
        self.revealed: list[list[bool]] = []
        self.flags: list[list[bool]] = []
        self.revealed_count = 0  # safe cells revealed (a revealed mine ends the game unrevealed)
        # the board as the player sees it, drawn again only after a reveal or a flag changed
        # it (most random moves are lost turns that change nothing)
        self._view: str | None = None

    # -- the episode ------------------------------------------------------------------
    def new_episode(self) -> str:
        if self._random:
            side = self.rng.randint(5, 10)
            self.rows = self.cols = side
            self.num_mines = side * side // 5
            self.max_turns = side * side
        # mines wait for the first reveal; drawing their seed now keeps the episode a
        # function of (seed, actions) whatever else uses the RNG in between
        self.layout_seed = self.rng.getrandbits(63)
        self.mines = []
        self.counts = [[0] * self.cols for _ in range(self.rows)]
        self.revealed = [[False] * self.cols for _ in range(self.rows)]
        self.flags = [[False] * self.cols for _ in range(self.rows)]
        self.revealed_count = 0
        self._view = None
        return (
            "You are playing Minesweeper.\n"
            f"The board has {self.rows} rows and {self.cols} columns (numbered from 0) and hides "
            f"{self.num_mines} mines. Reveal every cell without a mine to win; revealing a mine loses.\n"
            "A revealed cell shows how many of its 8 neighbours are mines; a 0 opens its neighbours "
            "automatically. Your first reveal is always safe.\n"
            f"You have {self.max_turns} turns. Each turn, answer with one command in \\boxed{{}}:\n"
            "- \\boxed{reveal R C} reveals the cell in row R, column C;\n"
            "- \\boxed{flag R C} puts or removes a flag (F), a note for yourself.\n"
            "Anything else in place of a command ends the game."
        )

    def parse_move(self, boxed: str) -> tuple[str, int, int] | None:
        return parse_move(boxed)

    def play(self, move: tuple[str, int, int]) -> str | Outcome:
        command, row, col = move
        if not (0 <= row < self.rows and 0 <= col < self.cols):
            return f"({row}, {col}) is off the board; the turn is lost."
        if command == "reveal":
            if self.revealed[row][col]:
                return f"({row}, {col}) is already revealed; the turn is lost."
            if self.flags[row][col]:
                return f"({row}, {col}) is flagged; remove the flag first. The turn is lost."
            if not self.mines:
                self._lay_mines(row, col)
            if self.counts[row][col] == MINE:
                return Outcome.loss(f"({row}, {col}) was a mine. You lose.\n\n{self._render(show_mines=True)}")
            opened = self._open(row, col)
            reward = opened / (self.rows * self.cols - self.num_mines)
            feedback = f"revealed ({row}, {col}), {opened} cell{'s' if opened != 1 else ''} opened."
            if self._cleared():
                text = f"{feedback} Every safe cell is revealed. You win!\n\n{self._render(show_mines=True)}"
                return Outcome.win(text, reward)
            return Outcome(feedback, reward)
        if command == "flag":
            if self.revealed[row][col]:
                return f"({row}, {col}) is revealed and cannot be flagged; the turn is lost."
            self.flags[row][col] = not self.flags[row][col]
            self._view = None
            change = "placed on" if self.flags[row][col] else "removed from"
            return f"flag {change} ({row}, {col})."
        shown = command if len(command) <= 20 else command[:20] + "..."
        return f"unknown command {shown!r} (use reveal or flag); the turn is lost."

    def last_turn_note(self) -> str:
        return f" That was your last turn.\n\n{self._render(show_mines=True)}"

    def sample_random_action(self) -> str:
        command = "flag" if self.rng.random() < 0.1 else "reveal"
        return f"\\boxed{{{command} {self.rng.randrange(self.rows)} {self.rng.randrange(self.cols)}}}"

    # -- the board --------------------------------------------------------------------
    def _lay_mines(self, safe_row: int, safe_col: int) -> None:
        table = _neighbour_table(self.rows, self.cols)
        keep_clear = {(safe_row, safe_col), *table[safe_row * self.cols + safe_col]}
        cells = [(r, c) for r in range(self.rows) for c in range(self.cols) if (r, c) not in keep_clear]
        mines = random.Random(self.layout_seed).sample(cells, self.num_mines)
        self.mines = sorted([r, c] for r, c in mines)
        counts = self.counts
        # each mine adds one to the count of every cell around it
        for r, c in mines:
            for nr, nc in table[r * self.cols + c]:
                counts[nr][nc] += 1
        for r, c in mines:
            counts[r][c] = MINE

    def _open(self, row: int, col: int) -> int:
        """Reveal ``(row, col)`` and, through zeros, its safe surroundings; returns how
        many cells were opened (flagged cells stay closed)."""
        revealed, flags, counts = self.revealed, self.flags, self.counts
        table, cols = _neighbour_table(self.rows, self.cols), self.cols
        revealed[row][col] = True
        opened, queue = 1, deque([(row, col)])
        while queue:
            r, c = queue.popleft()
            if counts[r][c] != 0:
                continue
            for nr, nc in table[r * cols + c]:
                if not revealed[nr][nc] and not flags[nr][nc]:
                    revealed[nr][nc] = True
                    opened += 1
                    queue.append((nr, nc))
        self.revealed_count += opened
        self._view = None
        return opened

    def _cleared(self) -> bool:
        return self.revealed_count == self.rows * self.cols - self.num_mines

    def _render(self, show_mines: bool = False) -> str:
        mines_shown = show_mines and bool(self.mines)
        grid = [
            [
                _SHOWN[count] if shown else ("*" if mines_shown and count == MINE else FLAG if flag else HIDDEN)
                for shown, flag, count in zip(revealed, flagged, counts)
            ]
            for revealed, flagged, counts in zip(self.revealed, self.flags, self.counts)
        ]
        return render_grid(grid, cell_width=1)

    def task_suffix(self) -> str:
        view = self._view
        if view is None:
            view = self._view = self._render()
        return (
            f"Board ('.' hidden, 'F' flagged, digits count adjacent mines):\n{view}\n"
            f"Turns left: {self.turns_left}. Enter your move."
        )

    # -- state ------------------------------------------------------------------------
    def game_state(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "cols": self.cols,
            "num_mines": self.num_mines,
            "layout_seed": self.layout_seed,
            "mines": [list(m) for m in self.mines],
            "counts": [list(row) for row in self.counts],
            "revealed": [list(row) for row in self.revealed],
            "flags": [list(row) for row in self.flags],
        }

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.rows, self.cols, self.num_mines = state["rows"], state["cols"], state["num_mines"]
        self.layout_seed = state["layout_seed"]
        self.mines = [list(m) for m in state["mines"]]
        self.counts = [list(row) for row in state["counts"]]
        self.revealed = [list(row) for row in state["revealed"]]
        self.flags = [list(row) for row in state["flags"]]
        self.revealed_count = sum(map(sum, self.revealed))
        self._view = None


def register(registry: Any) -> None:
    """Register GEM's Minesweeper ids."""
    entry = "gem_envs_games.minesweeper:MinesweeperEnv"
    registry.register("game:Minesweeper-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register("game:Minesweeper-v0-easy", entry, rows=5, cols=5, num_mines=5, max_turns=25)
    registry.register("game:Minesweeper-v0-hard", entry, rows=8, cols=8, num_mines=12, max_turns=64)
    registry.register("game:Minesweeper-v0-random", entry, rows=None, cols=None, num_mines=None, max_turns=None)
