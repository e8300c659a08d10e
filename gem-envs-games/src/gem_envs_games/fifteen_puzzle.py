"""The sliding-tile puzzle (15-puzzle and its 3- and 8-tile siblings).

>>> env = FifteenPuzzleEnv(num_rows=2, max_turns=10)
>>> obs, info = env.reset(seed=0)
>>> "__" in info["suffix"]
True

Moves name the direction a tile slides into the empty cell: ``up`` moves the
tile below the gap up, ``left`` the tile right of the gap left, and so on.
Rewards (GEM's): 1.0 when solved, 0 for every other move (a move off the board
changes nothing), -0.1 and the episode ends for a reply without a readable
``\\boxed{direction}``. When the turns run out the last reward adds the fraction
of cells (gap included) already in place.
"""

from __future__ import annotations

from typing import Any

from gem_envs_games.base import DirectionGame, Outcome, at_least

#: (num_rows, max_turns) drawn per episode when a setting is None (GEM's random preset)
RANDOM_PRESETS = ((2, 10), (3, 20), (4, 50))
DIRECTIONS = ("up", "down", "left", "right")
#: where the tile that slides in each direction sits, relative to the gap
SOURCE_OFFSET = {"up": (1, 0), "down": (-1, 0), "left": (0, 1), "right": (0, -1)}
OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
#: how a board is scrambled (the reference's ``init_algo`` values)
INIT_ALGOS = ("monte_carlo", "pure_random")


def goal_tiles(rows: int) -> list[int]:
    """The solved board, row-major, with 0 for the gap in the last cell."""
    return [*range(1, rows * rows), 0]


def slide(tiles: list[int], rows: int, direction: str) -> bool:
    """Slide a tile into the gap in place; False (and no change) if no tile is there."""
    gap = tiles.index(0)
    dr, dc = SOURCE_OFFSET[direction]
    r, c = divmod(gap, rows)
    r, c = r + dr, c + dc
    if not (0 <= r < rows and 0 <= c < rows):
        return False
    src = r * rows + c
    tiles[gap], tiles[src] = tiles[src], 0
    return True


def is_solvable(tiles: list[int], rows: int) -> bool:
    """Whether slides can reach the solved board: every slide is one transposition
    (gap and tile) that moves the gap one cell, so the permutation's parity always
    equals the parity of the gap's distance from its goal cell.

    >>> is_solvable([1, 2, 3, 0], 2), is_solvable([2, 1, 3, 0], 2)
    (True, False)
    """
    seen, transpositions = [False] * len(tiles), 0
    for start in range(len(tiles)):
        cell, length = start, 0
        while not seen[cell]:  # a cycle of length k is k - 1 transpositions
            seen[cell] = True
            # tile t belongs at index t - 1; the gap (0) at the last index
            cell, length = (tiles[cell] or len(tiles)) - 1, length + 1
        transpositions += max(length - 1, 0)
    gap_row, gap_col = divmod(tiles.index(0), rows)
    distance = (rows - 1 - gap_row) + (rows - 1 - gap_col)
    return transpositions % 2 == distance % 2


def render_tiles(tiles: list[int], rows: int) -> str:
    """One line per row, tiles right-aligned, the gap as ``__``."""
    cells = ["__" if t == 0 else f"{t:2d}" for t in tiles]
    return "\n".join(" ".join(cells[i : i + rows]) for i in range(0, rows * rows, rows))


class FifteenPuzzleEnv(DirectionGame):
    """Sliding puzzle on a ``num_rows`` x ``num_rows`` board in ``max_turns`` turns.

    ``init_algo`` is how the board is scrambled (the reference's two):

    - ``"monte_carlo"``: a random walk of gap moves from the solved board, never undoing
      the previous move. ``mc_rand_moves`` moves when given (the reference's default is
      100); by default between half and all of ``max_turns``, so that a solution within
      the turn limit always exists.
    - ``"pure_random"``: a uniformly drawn solvable board (a shuffle whose parity is
      repaired by swapping two tiles); most need more moves than the turn limit allows.

    Neither starts solved. With a setting None, each episode draws one of
    :data:`RANDOM_PRESETS`.

    >>> env = FifteenPuzzleEnv(num_rows=4, max_turns=100, init_algo="monte_carlo", mc_rand_moves=20)
    >>> _ = env.reset(seed=1)
    >>> is_solvable(env.tiles, 4)
    True
    """

    format_error = "no move found. Answer like \\boxed{up}."
    directions = DIRECTIONS

    def __init__(
        self,
        max_turns: int | None = 20,
        num_rows: int | None = 2,
        init_algo: str = "monte_carlo",
        mc_rand_moves: int | None = None,
    ) -> None:
        at_least("num_rows", num_rows, 2)
        at_least("max_turns", max_turns, 2)
        at_least("mc_rand_moves", mc_rand_moves, 1)
        if init_algo not in INIT_ALGOS:
            raise ValueError(f"init_algo must be one of {', '.join(map(repr, INIT_ALGOS))}, got {init_algo!r}")
        self.init_algo, self.mc_rand_moves = init_algo, mc_rand_moves
        self._random = num_rows is None or max_turns is None
        self.num_rows, self.max_turns = RANDOM_PRESETS[0] if self._random else (num_rows, max_turns)
        self.tiles: list[int] = goal_tiles(self.num_rows)

    # -- the episode ------------------------------------------------------------------
    def new_episode(self) -> str:
        if self._random:
            self.num_rows, self.max_turns = self.rng.choice(RANDOM_PRESETS)
        self.tiles = self._scramble()
        last = self.num_rows**2 - 1
        return (
            f"You are playing the {last}-puzzle on a {self.num_rows}x{self.num_rows} board.\n"
            f"Arrange the tiles 1 to {last} in order, row by row, with the empty cell (__) "
            "in the bottom-right corner.\n"
            "Each turn, slide one tile next to the empty cell into it:\n"
            "- up: the tile below the empty cell moves up\n"
            "- down: the tile above the empty cell moves down\n"
            "- left: the tile right of the empty cell moves left\n"
            "- right: the tile left of the empty cell moves right\n"
            f"You have {self.max_turns} turns. Answer with the direction in \\boxed{{}}, e.g. \\boxed{{up}}."
        )

    def _scramble(self) -> list[int]:
        goal = goal_tiles(self.num_rows)
        while True:
            tiles = self._shuffled() if self.init_algo == "pure_random" else self._walked()
            if tiles != goal:
                return tiles

    def _walked(self) -> list[int]:
        rows, tiles, last = self.num_rows, goal_tiles(self.num_rows), None
        moves = self.mc_rand_moves or self.rng.randint((self.max_turns + 1) // 2, self.max_turns)
        for _ in range(moves):
            options = [d for d in DIRECTIONS if d != OPPOSITE.get(last) and slide(list(tiles), rows, d)]
            last = self.rng.choice(options)
            slide(tiles, rows, last)
        return tiles

    def _shuffled(self) -> list[int]:
        tiles = goal_tiles(self.num_rows)
        self.rng.shuffle(tiles)
        if not is_solvable(tiles, self.num_rows):
            # swapping two tiles flips the permutation's parity: every solvable board
            # is then drawn equally often
            i, j = self.rng.sample([k for k, t in enumerate(tiles) if t != 0], 2)
            tiles[i], tiles[j] = tiles[j], tiles[i]
        return tiles

    def play(self, direction: str) -> str | Outcome:
        if not slide(self.tiles, self.num_rows, direction):
            return f"no tile can move {direction} into the empty cell; nothing moved."
        feedback = f"moved a tile {direction}."
        if self.tiles == goal_tiles(self.num_rows):
            return Outcome.win(f"{feedback} Solved!\n\n{render_tiles(self.tiles, self.num_rows)}")
        return feedback

    def _in_place(self) -> int:
        return sum(a == b for a, b in zip(self.tiles, goal_tiles(self.num_rows)))

    def last_turn_note(self) -> str:
        board = render_tiles(self.tiles, self.num_rows)
        return f" That was the last turn: {self._in_place()} of {len(self.tiles)} cells are in place.\n\n{board}"

    def partial_credit(self) -> float:
        """The fraction of cells (gap included) in place."""
        return self._in_place() / len(self.tiles)

    def task_suffix(self) -> str:
        return f"Board:\n{render_tiles(self.tiles, self.num_rows)}\nTurns left: {self.turns_left}. Enter your move."

    # -- the reference package's names -------------------------------------------------
    # scripts and tests written against the reference read and set the board by these names (its own tests
    # put a board in place with ``env.board = ...; env.blank_pos = env._get_empty_position()``); they are
    # views of ``tiles``, never a second copy
    @property
    def board(self) -> list[list[int | None]]:
        """The board as the reference holds it: rows of tiles, ``None`` for the empty cell (a copy)."""
        rows = self.num_rows
        return [[t or None for t in self.tiles[r * rows:(r + 1) * rows]] for r in range(rows)]

    @board.setter
    def board(self, board: list[list[int | None]]) -> None:
        rows = len(board)
        tiles = [int(t or 0) for row in board for t in row]
        if sorted(tiles) != list(range(rows * rows)) or any(len(row) != rows for row in board):
            raise ValueError(f"a {rows}x{rows} board holds the tiles 1 to {rows * rows - 1} and one empty cell")
        self.num_rows, self.tiles = rows, tiles

    @property
    def blank_pos(self) -> tuple[int, int]:
        """``(row, col)`` of the empty cell (derived from the board; setting it changes nothing)."""
        return self._get_empty_position()

    @blank_pos.setter
    def blank_pos(self, position: tuple[int, int]) -> None:
        pass  # the reference keeps it beside the board; here it is always the board's own

    @property
    def greatest_num(self) -> int:
        return self.num_rows**2 - 1

    @property
    def goal_board(self) -> list[list[int | None]]:
        return self._generate_goal_board()

    def _generate_goal_board(self) -> list[list[int | None]]:
        rows, goal = self.num_rows, goal_tiles(self.num_rows)
        return [[t or None for t in goal[r * rows:(r + 1) * rows]] for r in range(rows)]

    def _get_empty_position(self) -> tuple[int, int]:
        return divmod(self.tiles.index(0), self.num_rows)

    def _is_solvable(self, board: list[list[int | None]]) -> bool:
        return is_solvable([int(t or 0) for row in board for t in row], len(board))

    def _is_solved(self) -> bool:
        return self.tiles == goal_tiles(self.num_rows)

    def _move(self, direction: str) -> bool:
        """Slide a tile ``direction`` into the empty cell; False (nothing moved) where none can."""
        return direction in SOURCE_OFFSET and slide(self.tiles, self.num_rows, direction)

    def _render_board(self) -> str:
        return render_tiles(self.tiles, self.num_rows)

    # -- state ------------------------------------------------------------------------
    def game_state(self) -> dict[str, Any]:
        return {"num_rows": self.num_rows, "tiles": list(self.tiles)}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.num_rows, self.tiles = state["num_rows"], list(state["tiles"])


def register(registry: Any) -> None:
    """Register GEM's sliding-puzzle ids."""
    entry = "gem_envs_games.fifteen_puzzle:FifteenPuzzleEnv"
    registry.register("game:FifteenPuzzle-v0", entry)
    registry.register("game:FifteenPuzzle-v0-easy", entry, num_rows=2, max_turns=10)
    registry.register("game:FifteenPuzzle-v0-hard", entry, num_rows=4, max_turns=50)
    registry.register("game:FifteenPuzzle-v0-random", entry, num_rows=None, max_turns=None)
