"""Crosswords: fill a small crossword one letter per turn from its clues.

>>> env = CrosswordsEnv(hardcore=False, max_turns=30, num_words=3)
>>> obs, info = env.reset(seed=0)
>>> "Across" in info["suffix"] or "Down" in info["suffix"]
True

Every puzzle is connected (each word crosses another), has no letters touching except
at crossings, and has at most ``max_turns`` letter cells, so it can always be finished
in time. Clues come from :func:`gem_envs_games.words.crossword_clues`; each clue says
where its word starts, its direction and its length.

Rewards (GEM's): each right letter earns ``1 / letter cells`` (a finished grid has
earned 1.0); wrong letters and invalid moves (off the grid, a black square, a filled
cell) earn 0; a reply without ``\\boxed{row column letter}`` ends the episode with -0.1.
"""

from __future__ import annotations

import random
import re
import string
from typing import Any

from gem_envs_games import words
from gem_envs_games.base import Outcome, TurnGame
from gem_envs_games.board import render_grid

_MOVE = re.compile(r"^[\s\[(]*(\d{1,6})[\s,]+(\d{1,6})[\s,)\]]*([A-Za-z])[\s\])]*$")
BLACK, EMPTY = ".", "_"
ACROSS, DOWN = "across", "down"
_STEP = {ACROSS: (0, 1), DOWN: (1, 0)}
#: how many word samples to try before giving up on a layout
_ATTEMPTS = 500


def parse_move(text: str) -> tuple[int, int, str] | None:
    """``(row, col, LETTER)`` from e.g. ``"2 3 a"``, ``"[2, 3, A]"`` or ``"(2, 3) A"``.

    >>> parse_move("2 3 a"), parse_move("[2, 3, A]"), parse_move("2 3 ab")
    ((2, 3, 'A'), (2, 3, 'A'), None)
    """
    match = _MOVE.match(text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), match.group(3).upper()


def layout(
    entries: list[tuple[str, str]], rng: random.Random, max_cells: int
) -> list[tuple[str, str, int, int, str]] | None:
    """Place the words so that each crosses an earlier one; returns
    ``(word, clue, row, col, direction)`` with the grid's top-left at (0, 0), or None if
    these words do not fit together within ``max_cells`` letter cells."""
    cells: dict[tuple[int, int], str] = {}
    used: dict[tuple[int, int], set[str]] = {}  # directions running through each cell
    placed: list[tuple[str, str, int, int, str]] = []

    def fits(word: str, row: int, col: int, direction: str) -> bool:
        dr, dc = _STEP[direction]
        if (row - dr, col - dc) in cells or (row + dr * len(word), col + dc * len(word)) in cells:
            return False  # the word would run on into another
        crossings = 0
        for i, letter in enumerate(word):
            cell = (row + dr * i, col + dc * i)
            if cell in cells:
                if cells[cell] != letter or direction in used[cell]:
                    return False
                crossings += 1
            elif (cell[0] + dc, cell[1] + dr) in cells or (cell[0] - dc, cell[1] - dr) in cells:
                return False  # a side neighbour would form a stray two-letter word
        return crossings > 0

    def put(word: str, clue: str, row: int, col: int, direction: str) -> None:
        dr, dc = _STEP[direction]
        for i, letter in enumerate(word):
            cell = (row + dr * i, col + dc * i)
            cells[cell] = letter
            used.setdefault(cell, set()).add(direction)
        placed.append((word, clue, row, col, direction))

    first, *rest = sorted(entries, key=lambda e: -len(e[0]))
    put(first[0], first[1], 0, 0, rng.choice([ACROSS, DOWN]))
    for word, clue in rest:
        options = []
        for p_word, _, p_row, p_col, p_dir in placed:
            direction = DOWN if p_dir == ACROSS else ACROSS
            pr, pc = _STEP[p_dir]
            for j, p_letter in enumerate(p_word):
                for i, letter in enumerate(word):
                    if letter == p_letter:
                        dr, dc = _STEP[direction]
                        row, col = p_row + pr * j - dr * i, p_col + pc * j - dc * i
                        if fits(word, row, col, direction):
                            options.append((row, col, direction))
        if not options:
            return None
        put(word, clue, *rng.choice(sorted(options)))
    if len(cells) > max_cells:
        return None
    top = min(r for r, _ in cells)
    left = min(c for _, c in cells)
    return [(w, c, r - top, col - left, d) for w, c, r, col, d in placed]


class CrosswordsEnv(TurnGame):
    """A crossword of ``num_words`` words to fill within ``max_turns`` turns.

    ``hardcore`` uses the harder clue set. With any setting None (GEM's random preset)
    every episode draws ``hardcore`` and uses 3 words and 20 turns.
    """

    # the reference package's names for this game's state, views of ``words`` and ``letter_cells``
    #: ``{WORD: clue}``
    clues = property(lambda self: {word: clue for word, clue, *_ in self.words})
    #: ``{WORD: (row, col, "across" | "down")}``, (row, col) the word's first cell
    placed_words = property(lambda self: {word: (row, col, way) for word, _, row, col, way in self.words})
    #: how many cells take a letter
    total_letter_cells = property(lambda self: len(self.letter_cells))

    format_error = "no move like \\boxed{row column letter} found."

    def __init__(self, hardcore: bool | None = False, max_turns: int | None = 100, num_words: int | None = 5) -> None:
        self._random = hardcore is None or max_turns is None or num_words is None
        if not self._random and (num_words < 1 or max_turns < 1):
            raise ValueError("num_words and max_turns must be at least 1")
        self.hardcore, self.max_turns, self.num_words = (False, 20, 3) if self._random else (
            bool(hardcore), max_turns, num_words
        )
        self.words: list[list[Any]] = []  # [word, clue, row, col, direction], numbered in order
        self.solution: list[list[str]] = []
        self.board: list[list[str]] = []
        self.letter_cells: list[list[int]] = []

    # -- the episode ------------------------------------------------------------------
    def new_episode(self) -> str:
        if self._random:
            self.hardcore = self.rng.random() < 0.5
        bank = list(words.crossword_clues(self.hardcore))
        for _ in range(_ATTEMPTS):
            placed = layout(self.rng.sample(bank, self.num_words), self.rng, self.max_turns)
            if placed is not None:
                break
        else:
            raise ValueError(
                f"could not lay out {self.num_words} crossing words within {self.max_turns} cells; "
                "use fewer words or more turns"
            )
        placed.sort(key=lambda p: (p[2], p[3], p[4]))
        self.words = [list(p) for p in placed]
        height = max(r + (len(w) if d == DOWN else 1) for w, _, r, _, d in placed)
        width = max(c + (len(w) if d == ACROSS else 1) for w, _, _, c, d in placed)
        self.solution = [[BLACK] * width for _ in range(height)]
        for word, _, row, col, direction in placed:
            dr, dc = _STEP[direction]
            for i, letter in enumerate(word):
                self.solution[row + dr * i][col + dc * i] = letter
        self.board = [[EMPTY if ch != BLACK else BLACK for ch in row] for row in self.solution]
        self.letter_cells = [[r, c] for r, row in enumerate(self.solution) for c, ch in enumerate(row) if ch != BLACK]
        return (
            "You are playing Crosswords.\n"
            f"Fill the grid below from the clues. Cells to fill are '{EMPTY}', black squares are '{BLACK}'; "
            "rows and columns are numbered from 0. Each clue gives the row and column where its word "
            "starts, its direction (across: left to right, down: top to bottom) and its length.\n"
            f"Each turn, write one letter: \\boxed{{row column letter}}, e.g. \\boxed{{0 0 A}}. You have "
            f"{self.max_turns} turns for {len(self.letter_cells)} letters. A wrong letter is rejected; "
            "a black square, a filled cell or a cell off the grid wastes the turn. "
            "Anything else in place of a move ends the game."
        )

    def parse_move(self, boxed: str) -> tuple[int, int, str] | None:
        return parse_move(boxed)

    def play(self, move: tuple[int, int, str]) -> str | Outcome:
        row, col, letter = move
        if not (0 <= row < len(self.board) and 0 <= col < len(self.board[0])):
            return f"({row}, {col}) is off the grid; the turn is lost."
        if self.board[row][col] == BLACK:
            return f"({row}, {col}) is a black square; the turn is lost."
        if self.board[row][col] != EMPTY:
            return f"({row}, {col}) is already filled; the turn is lost."
        if self.solution[row][col] != letter:
            return f"{letter} is wrong at ({row}, {col})."
        self.board[row][col] = letter
        reward = 1 / len(self.letter_cells)
        feedback = f"{letter} is right at ({row}, {col})."
        if all(EMPTY not in line for line in self.board):
            return Outcome.win(f"{feedback} The crossword is complete. You win!\n\n{render_grid(self.board)}", reward)
        return Outcome(feedback, reward)

    def last_turn_note(self) -> str:
        return f" That was your last turn.\n\n{render_grid(self.solution)}"

    def task_suffix(self) -> str:
        clues = "\n".join(
            f"{n}. {direction.capitalize()} from ({row}, {col}), {len(word)} letters: {clue}"
            for n, (word, clue, row, col, direction) in enumerate(self.words, start=1)
        )
        return f"Grid:\n{render_grid(self.board)}\nClues:\n{clues}\nTurns left: {self.turns_left}. Enter your move."

    def sample_random_action(self) -> str:
        row, col = self.rng.choice(self.letter_cells) if self.letter_cells else (0, 0)
        return f"\\boxed{{{row} {col} {self.rng.choice(string.ascii_uppercase)}}}"

    # -- state ------------------------------------------------------------------------
    def game_state(self) -> dict[str, Any]:
        return {
            "hardcore": self.hardcore,
            "num_words": self.num_words,
            "words": [list(w) for w in self.words],
            "solution": [list(row) for row in self.solution],
            "board": [list(row) for row in self.board],
            "letter_cells": [list(cell) for cell in self.letter_cells],
        }

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.hardcore, self.num_words = state["hardcore"], state["num_words"]
        self.words = [list(w) for w in state["words"]]
        self.solution = [list(row) for row in state["solution"]]
        self.board = [list(row) for row in state["board"]]
        self.letter_cells = [list(cell) for cell in state["letter_cells"]]


def register(registry: Any) -> None:
    """Register GEM's Crosswords ids."""
    entry = "gem_envs_games.crosswords:CrosswordsEnv"
    registry.register("game:Crosswords-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register("game:Crosswords-v0-easy", entry, hardcore=False, max_turns=30, num_words=3)
    registry.register("game:Crosswords-v0-hard", entry, hardcore=True, max_turns=40, num_words=3)
    registry.register("game:Crosswords-v0-random", entry, hardcore=None, max_turns=None, num_words=None)
