"""The reference package's attribute names on our games (issue 34, point 7).

The reference's own FifteenPuzzle tests read ``env.board``, ``env.blank_pos``, ``env.turn_count`` and call
``env._move``, ``env._get_empty_position``, ``env._is_solvable`` and ``env._generate_goal_board``; with ours four of
its cases stopped at AttributeError. The same behaviours, checked here with our own code, then the reference's
names on every game that keeps that state under another name: views of our state, never a copy.
"""

from __future__ import annotations

from collections import deque
from copy import deepcopy

import pytest

import gem
from gem_envs_games.fifteen_puzzle import FifteenPuzzleEnv

GOAL = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, None]]
NOT_GOAL = [[1, 2, 3, 4], [5, 6, 7, 8], [9, None, 11, 12], [13, 10, 14, 15]]


def classic() -> FifteenPuzzleEnv:
    return FifteenPuzzleEnv(max_turns=100, num_rows=4, init_algo="monte_carlo", mc_rand_moves=20)


def put(env: FifteenPuzzleEnv, board, turns: int = 0) -> None:
    """What the reference's tests do to fix a position: reset, then assign the board and the counters."""
    env.reset()
    env.board = deepcopy(board)
    env.blank_pos = env._get_empty_position()
    env.turn_count = turns


def test_the_goal_board_and_the_empty_cell():
    env = classic()
    put(env, env._generate_goal_board())
    assert env.board == GOAL and env.goal_board == GOAL
    assert env._get_empty_position() == (3, 3) == env.blank_pos
    assert env.greatest_num == 15 and env._is_solved()


@pytest.mark.parametrize(("move", "expected"), [
    ("down", [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, None], [13, 14, 15, 12]]),
    ("right", [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, None, 15]]),
])
def test_a_step_from_the_goal_moves_one_tile(move, expected):
    env = classic()
    put(env, GOAL)
    env.step(rf"\\boxed{{{move}}}")  # the reference's tests send the raw string r'\\boxed{down}'
    assert env.board == expected
    assert sum(cell is None for row in env.board for cell in row) == 1
    assert env.turn_count == 1


@pytest.mark.parametrize("move", ["up", "left"])
def test_moves_with_no_tile_to_slide_are_invalid(move):
    env = classic()
    put(env, GOAL)
    assert env._move(move) is False and env.board == GOAL


@pytest.mark.parametrize(("move", "delta"), [("up", (1, 0)), ("down", (-1, 0)), ("left", (0, 1)), ("right", (0, -1))])
def test_every_move_from_an_inner_gap_is_valid_and_moves_it(move, delta):
    env = classic()
    put(env, NOT_GOAL)
    env.blank_pos = (2, 1)
    assert env._move(move) is True
    assert env._get_empty_position() == (2 + delta[0], 1 + delta[1])


def test_solvability():
    env = classic()
    assert env._is_solvable([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, None, 15]])
    assert not env._is_solvable([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 15, 14, None]])


def _distance_to_goal(board) -> int:
    """Fewest slides from ``board`` to the goal (breadth-first; boards of 3x3 or less)."""
    rows = len(board)
    start = tuple(cell or 0 for row in board for cell in row)
    goal = (*range(1, rows * rows), 0)
    seen, todo = {start}, deque([(start, 0)])
    while todo:
        tiles, depth = todo.popleft()
        if tiles == goal:
            return depth
        gap = tiles.index(0)
        r, c = divmod(gap, rows)
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            if 0 <= r + dr < rows and 0 <= c + dc < rows:
                nxt = list(tiles)
                src = (r + dr) * rows + c + dc
                nxt[gap], nxt[src] = nxt[src], 0
                if tuple(nxt) not in seen:
                    seen.add(tuple(nxt))
                    todo.append((tuple(nxt), depth + 1))
    raise AssertionError("unsolvable board")


@pytest.mark.parametrize("init_algo", ["monte_carlo", "pure_random"])
def test_generated_boards_are_valid_and_solvable(init_algo):
    env = FifteenPuzzleEnv(max_turns=30, num_rows=3, init_algo=init_algo, mc_rand_moves=12)
    for seed in range(6):
        env.reset(seed=seed)
        board = env.board
        assert sorted(cell or 0 for row in board for cell in row) == list(range(9))
        assert env._is_solvable(board) and not env._is_solved()
        if init_algo == "monte_carlo":
            assert _distance_to_goal(board) <= 12


def test_assigning_a_board_that_is_not_one_is_refused():
    env = classic()
    env.reset()
    with pytest.raises(ValueError, match="tiles 1 to 15"):
        env.board = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 14, None]]


@pytest.mark.parametrize(("env_id", "names"), [
    ("game:GuessTheNumber-v0-easy", {"game_number": "secret", "previous_guesses": "guesses"}),
    ("game:Hangman-v0-easy", {"secret_word": "secret", "guessed_letters": "guessed"}),
    ("game:Mastermind-v0-easy", {"game_code": "code", "previous_guesses": "guesses"}),
    ("game:Wordle-v0-easy", {"secret_word": "secret", "previous_guesses": "guesses"}),
    ("game:Game2048-v0-easy", {"max_tile_achieved": "best", "init_max_tile_achieved": "start_max"}),
    ("game:Sudoku-v0-easy", {"full_grid": "solution", "init_num_empty": "empty_at_start"}),
    ("game:TowerofHanoi-v0-easy", {"board": "towers"}),
])
def test_every_game_answers_to_the_references_names(env_id, names):
    env = gem.make(env_id).unwrapped
    env.reset(seed=3)
    env.step(env.sample_random_action())
    assert env.turn_count == env.turn == 1
    for theirs, ours in names.items():
        value, own = getattr(env, theirs), getattr(env, ours)
        if isinstance(value, set):  # the reference keeps guesses in sets
            assert value == {tuple(g) if isinstance(g, list) else g for g in own}
        else:
            assert value == own
    env.turn_count = 0  # the reference's tests assign it
    assert env.turn == 0
