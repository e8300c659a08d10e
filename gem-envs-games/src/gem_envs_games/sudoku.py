"""Sudoku on a 4x4 or 9x9 grid, one digit per turn, with a unique solution.

>>> env = SudokuEnv(clues=10, max_turns=15, scale=4)
>>> obs, info = env.reset(seed=0)
>>> env.step("\\\\boxed{9 9 9}")[1]
0.0

Rewards (GEM's): each correct digit earns ``1 / (empty cells at the start)``, so a
finished grid has earned 1.0 in all; a wrong digit, a filled cell or a cell off the
grid earns 0 and changes nothing; a reply without a readable ``\\boxed{row column
digit}`` earns -0.1 and ends the episode.

``clues`` keeps GEM's meaning, which is not what the name says: the generator tries
to empty that many cells (in random order, keeping each only if the solution stays
unique), so ``clues=50`` on 9x9 leaves at most 50 empty cells and at least 31 givens.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gem_envs_games.base import Outcome, TurnGame, at_least, bounded_int, reference_alias

#: (scale, clues, max_turns) drawn per episode when a setting is None (GEM's random preset)
RANDOM_PRESETS = ((4, 10, 15), (9, 50, 50))

_SPACES = re.compile(r"\s*")
_NUMBER = re.compile(r"\d+")
#: the three fields of a move and the letter each may start with
_FIELDS = ("rR", "cC", "")

Grid = list[list[int]]


def parse_move(text: str) -> tuple[int, int, int] | None:
    """``(row, column, digit)`` (1-based) from the box content, e.g. ``"3 1 7"``.

    Fields are separated by whitespace or by one comma (with whitespace around it if
    you like); the row may start with ``R`` and the column with ``C``. One pass over
    the text, never backtracking: hostile boxes cost linear time.

    >>> parse_move("R3 C1 7"), parse_move("3,1,7"), parse_move("r 3 , c 1  7"), parse_move("3 1")
    ((3, 1, 7), (3, 1, 7), (3, 1, 7), None)
    """
    move = text.strip()
    numbers = []
    pos = 0
    for index, letters in enumerate(_FIELDS):
        if index:
            after = _SPACES.match(move, pos).end()
            if after < len(move) and move[after] == ",":
                after = _SPACES.match(move, after + 1).end()
            elif after == pos:
                return None
            pos = after
        if letters and pos < len(move) and move[pos] in letters:
            pos = _SPACES.match(move, pos + 1).end()
        number = _NUMBER.match(move, pos)
        if number is None:
            return None
        numbers.append(bounded_int(number.group()))
        pos = number.end()
    return (numbers[0], numbers[1], numbers[2]) if pos == len(move) else None


def solve(grid: Grid, limit: int = 1) -> list[Grid]:
    """Up to ``limit`` solutions of ``grid`` (0 = empty), by constraint propagation
    and search on the cell with the fewest candidates.

    >>> solve([[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]], limit=2)[0][0]
    [1, 2, 3, 4]
    """
    n = len(grid)
    k = math.isqrt(n)
    full = (1 << (n + 1)) - 2  # bits 1..n
    rows, cols, boxes = [0] * n, [0] * n, [0] * n
    empty = []
    work = [list(row) for row in grid]
    for r in range(n):
        for c in range(n):
            d = work[r][c]
            if d:
                bit, b = 1 << d, (r // k) * k + c // k
                if (rows[r] | cols[c] | boxes[b]) & bit:
                    return []
                rows[r] |= bit
                cols[c] |= bit
                boxes[b] |= bit
            else:
                empty.append((r, c, (r // k) * k + c // k))
    found: list[Grid] = []

    def search() -> None:
        best, best_free, best_count = -1, 0, n + 1
        for i, (r, c, b) in enumerate(empty):
            if work[r][c]:
                continue
            free = full & ~(rows[r] | cols[c] | boxes[b])
            count = bin(free).count("1")
            if count < best_count:
                best, best_free, best_count = i, free, count
                if count <= 1:
                    break
        if best < 0:
            found.append([list(row) for row in work])
            return
        r, c, b = empty[best]
        while best_free and len(found) < limit:
            bit = best_free & -best_free
            best_free ^= bit
            work[r][c] = bit.bit_length() - 1
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            search()
            rows[r] ^= bit
            cols[c] ^= bit
            boxes[b] ^= bit
        work[r][c] = 0

    search()
    return found


def render_grid(grid: Grid) -> str:
    """The grid with 1-based row and column numbers, boxes ruled off, ``.`` for empty."""
    n = len(grid)
    k = math.isqrt(n)
    width = len(str(n))

    def group(cells: list[str]) -> str:
        return " | ".join(" ".join(cells[i : i + k]) for i in range(0, n, k))

    rule = "    +" + "+".join("-" * ((width + 1) * k + 1) for _ in range(k)) + "+"
    lines = ["      " + group([f"{c + 1:>{width}}" for c in range(n)]), rule]
    for r, row in enumerate(grid):
        lines.append(f" {r + 1:>2} | " + group([f"{d:>{width}}" if d else "." * width for d in row]) + " |")
        if (r + 1) % k == 0:
            lines.append(rule)
    return "\n".join(lines)


class SudokuEnv(TurnGame):
    """Fill a ``scale`` x ``scale`` Sudoku (scale 4 or 9) in ``max_turns`` turns.

    Every puzzle has exactly one solution and at most ``clues`` empty cells (see the
    module docstring for GEM's meaning of ``clues``); every preset's turn limit is at
    least its number of empty cells. With a setting None, each episode draws one of
    :data:`RANDOM_PRESETS`.
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    full_grid = reference_alias("solution")
    init_num_empty = reference_alias("empty_at_start")

    format_error = "no move found. Answer like \\boxed{1 3 4}."

    def __init__(self, clues: int | None = 30, max_turns: int | None = 100, scale: int | None = 9) -> None:
        if scale is not None and scale not in (4, 9):
            raise ValueError(f"scale must be 4 or 9, got {scale}")
        at_least("clues", clues, 1)
        at_least("max_turns", max_turns, 1)
        self._random = scale is None or clues is None or max_turns is None
        self.scale, self.clues, self.max_turns = RANDOM_PRESETS[0] if self._random else (scale, clues, max_turns)
        self.solution: Grid = []
        self.board: Grid = []
        self.empty_at_start = 0
        # the board as drawn, drawn again only after a digit is placed (most moves place none)
        self._view: str | None = None

    # -- the episode ------------------------------------------------------------------
    def new_episode(self) -> str:
        if self._random:
            self.scale, self.clues, self.max_turns = self.rng.choice(RANDOM_PRESETS)
        self.solution = self._full_grid()
        self.board = self._dig(self.solution)
        self._view = None
        self.empty_at_start = sum(row.count(0) for row in self.board)
        n, k = self.scale, math.isqrt(self.scale)
        return (
            f"You are playing Sudoku on a {n}x{n} grid ({k}x{k} boxes).\n"
            f"Fill every empty cell (.) with a digit from 1 to {n} so that each row, each column "
            f"and each {k}x{k} box holds every digit exactly once. The puzzle has exactly one solution.\n"
            "Each turn, place one digit: answer with row, column and digit in \\boxed{}, "
            "e.g. \\boxed{1 3 4} puts 4 in row 1, column 3.\n"
            "Given digits cannot be changed; a wrong digit is refused.\n"
            f"There are {self.empty_at_start} empty cells and you have {self.max_turns} turns."
        )

    def _full_grid(self) -> Grid:
        """A random solved grid: a valid pattern with rows, columns, bands, stacks and
        digits shuffled, which keeps it valid."""
        n, k, rng = self.scale, math.isqrt(self.scale), self.rng

        def order() -> list[int]:
            bands = rng.sample(range(k), k)
            return [band * k + inner for band in bands for inner in rng.sample(range(k), k)]

        rows, cols, digits = order(), order(), rng.sample(range(1, n + 1), n)
        grid = [[digits[(k * (r % k) + r // k + c) % n] for c in cols] for r in rows]
        return [list(col) for col in zip(*grid)] if rng.random() < 0.5 else grid

    def _dig(self, solution: Grid) -> Grid:
        n = self.scale
        puzzle = [list(row) for row in solution]
        cells = [(r, c) for r in range(n) for c in range(n)]
        self.rng.shuffle(cells)
        for r, c in cells[: min(self.clues, n * n)]:
            puzzle[r][c] = 0
            if len(solve(puzzle, limit=2)) != 1:
                puzzle[r][c] = solution[r][c]
        return puzzle

    parse_move = staticmethod(parse_move)

    def play(self, move: tuple[int, int, int]) -> str | Outcome:
        row, col, digit = move
        n = self.scale
        where = f"{digit} at row {row}, column {col}"
        if not (1 <= row <= n and 1 <= col <= n and 1 <= digit <= n):
            return f"{where} is off the grid (rows, columns and digits run 1 to {n})."
        if self.board[row - 1][col - 1]:
            return f"row {row}, column {col} is already filled."
        if self.solution[row - 1][col - 1] != digit:
            if self._clashes(row - 1, col - 1, digit):
                return f"{where} repeats a digit in its row, column or box."
            return f"{where} clashes with nothing yet, but leaves the puzzle without a solution."
        self.board[row - 1][col - 1] = digit
        self._view = None
        reward = 1.0 / self.empty_at_start
        feedback = f"placed {where}."
        if self.board == self.solution:
            return Outcome.win(f"{feedback} Solved!\n\n{render_grid(self.board)}", reward)
        return Outcome(feedback, reward)

    def last_turn_note(self) -> str:
        left = sum(row.count(0) for row in self.board)
        return f" That was the last turn: {left} cells are still empty.\n\n{render_grid(self.board)}"

    def _clashes(self, r: int, c: int, digit: int) -> bool:
        k = math.isqrt(self.scale)
        br, bc = r - r % k, c - c % k
        box = [self.board[i][j] for i in range(br, br + k) for j in range(bc, bc + k)]
        return digit in self.board[r] or digit in (row[c] for row in self.board) or digit in box

    def task_suffix(self) -> str:
        view = self._view
        if view is None:
            view = self._view = render_grid(self.board)
        return f"Grid:\n{view}\nTurns left: {self.turns_left}. Enter your move."

    def sample_random_action(self) -> str:
        """A random well-formed move; drawn from the numpy stream, so sampling leaves the
        game's own draws (``self.rng``) unchanged."""
        row, col, digit = (int(x * self.scale) + 1 for x in self.np_random.random(3))
        return f"\\boxed{{{row} {col} {digit}}}"

    # -- state ------------------------------------------------------------------------
    def game_state(self) -> dict[str, Any]:
        return {
            "scale": self.scale,
            "clues": self.clues,
            "solution": [list(row) for row in self.solution],
            "board": [list(row) for row in self.board],
            "empty_at_start": self.empty_at_start,
        }

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.scale, self.clues = state["scale"], state["clues"]
        self.solution = [list(row) for row in state["solution"]]
        self.board = [list(row) for row in state["board"]]
        self._view = None
        self.empty_at_start = state["empty_at_start"]


def register(registry: Any) -> None:
    """Register GEM's Sudoku ids."""
    entry = "gem_envs_games.sudoku:SudokuEnv"
    registry.register("game:Sudoku-v0", entry)
    registry.register("game:Sudoku-v0-easy", entry, clues=10, max_turns=15, scale=4)
    registry.register("game:Sudoku-v0-hard", entry, clues=50, max_turns=50, scale=9)
    registry.register("game:Sudoku-v0-random", entry, clues=None, max_turns=None, scale=None)
