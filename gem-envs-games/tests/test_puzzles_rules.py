"""Rules and reward shapes of the puzzle games (GEM's), position by position."""

from __future__ import annotations

import pytest

import gem
from gem_envs_games.fifteen_puzzle import FifteenPuzzleEnv
from gem_envs_games.game2048 import Game2048Env, merge_line, slide_board
from gem_envs_games.sokoban import SokobanEnv
from gem_envs_games.sudoku import SudokuEnv, solve
from gem_envs_games.tower_of_hanoi import TowerofHanoiEnv


def boxed(move: str) -> str:
    return f"My move: \\boxed{{{move}}}"


# -- Tower of Hanoi --------------------------------------------------------------------
def test_hanoi_illegal_moves_change_nothing_and_earn_zero():
    env = TowerofHanoiEnv(num_disks=3, max_turns=10)
    env.reset(seed=0)
    for move in ("B C", "A A"):
        obs, reward, terminated, _, _ = env.step(boxed(move))
        assert (reward, terminated) == (0.0, False)
    env.step(boxed("A C"))
    obs, reward, *_ = env.step(boxed("A C"))  # disk 2 onto disk 1
    assert reward == 0.0 and "cannot go on" in obs
    assert env.towers == {"A": [3, 2], "B": [], "C": [1]}


def test_hanoi_out_of_turns_scores_the_disks_on_c():
    env = TowerofHanoiEnv(num_disks=3, max_turns=2)
    env.reset(seed=0)
    env.step(boxed("a,c"))
    obs, reward, terminated, truncated, info = env.step(boxed("A B"))
    assert (reward, terminated, truncated, info["correct"]) == (pytest.approx(1 / 3), True, True, False)


# -- sliding puzzle --------------------------------------------------------------------
def _puzzle(tiles, max_turns=10):
    env = FifteenPuzzleEnv(num_rows=3, max_turns=max_turns)
    env.reset(seed=0)
    env.set_state({**env.get_state(), "tiles": tiles})
    return env


def test_fifteen_puzzle_directions_name_the_tile_that_slides():
    env = _puzzle([1, 2, 3, 4, 0, 5, 7, 8, 6])
    env.step(boxed("left"))  # 5, right of the gap, slides left
    assert env.tiles == [1, 2, 3, 4, 5, 0, 7, 8, 6]
    obs, reward, terminated, truncated, info = env.step(boxed("up"))  # 6 slides up
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)


def test_fifteen_puzzle_blocked_move_and_partial_credit_at_the_limit():
    env = _puzzle([1, 2, 3, 4, 5, 6, 7, 0, 8], max_turns=2)
    # the last box counts: no tile is below the gap
    obs, reward, terminated, _, _ = env.step(boxed("down") + " no wait " + boxed("up"))
    assert (reward, terminated) == (0.0, False) and "nothing moved" in obs
    obs, reward, terminated, truncated, _ = env.step(boxed("right"))  # 7 slides right: 6 of 9 in place
    assert (terminated, truncated) == (True, True) and reward == pytest.approx(6 / 9)


def test_fifteen_puzzle_scrambles_fit_the_turn_limit():
    from gem_envs_games.solvers.fifteen_puzzle import solve_tiles

    for rows, turns in ((2, 10), (3, 20)):
        env = FifteenPuzzleEnv(num_rows=rows, max_turns=turns)
        for seed in range(10):
            env.reset(seed=seed)
            assert 1 <= len(solve_tiles(env.tiles)) <= turns


# -- Sudoku ----------------------------------------------------------------------------
@pytest.mark.parametrize(("clues", "turns", "scale", "seeds"), [(10, 15, 4, 10), (50, 50, 9, 3), (30, 100, 9, 2)])
def test_sudoku_puzzles_have_one_solution_and_fit_the_turn_limit(clues, turns, scale, seeds):
    env = SudokuEnv(clues=clues, max_turns=turns, scale=scale)
    for seed in range(seeds):
        env.reset(seed=seed)
        assert solve(env.board, limit=2) == [env.solution]
        assert 0 < env.empty_at_start <= min(clues, turns)
        assert all(sorted(row) == list(range(1, scale + 1)) for row in env.solution)


def test_sudoku_rewards_each_correct_digit_and_refuses_the_rest():
    env = SudokuEnv(clues=10, max_turns=15, scale=4)
    env.reset(seed=5)
    r, c = next((r, c) for r in range(4) for c in range(4) if env.board[r][c] == 0)
    wrong = next(d for d in range(1, 5) if d != env.solution[r][c])
    filled = next((r2, c2) for r2 in range(4) for c2 in range(4) if env.board[r2][c2])
    for move in (f"{r + 1} {c + 1} {wrong}", f"{filled[0] + 1} {filled[1] + 1} 1", "5 1 1", "1 1 0"):
        obs, reward, terminated, _, _ = env.step(boxed(move))
        assert (reward, terminated) == (0.0, False), move
    obs, reward, *_ = env.step(boxed(f"R{r + 1} C{c + 1} {env.solution[r][c]}"))
    assert reward == pytest.approx(1 / env.empty_at_start)
    assert env.board[r][c] == env.solution[r][c]


# -- 2048 ------------------------------------------------------------------------------
def test_2048_merges_each_tile_once_per_move():
    assert merge_line([2, 2, 2, 2]) == [4, 4, 0, 0]
    assert merge_line([0, 4, 4, 8]) == [8, 8, 0, 0]
    assert slide_board([[2, 0], [2, 4]], "up") == [[4, 4], [0, 0]]


def test_2048_progress_rewards_and_a_move_that_changes_nothing():
    env = Game2048Env(target_tile=16, max_turns=20)
    env.reset(seed=0)
    env.set_state({**env.get_state(), "board": [[4, 4, 0, 0], [0] * 4, [0] * 4, [0] * 4], "start_max": 4, "best": 4})
    obs, reward, terminated, *_ = env.step(boxed("up"))
    assert (reward, terminated) == (0.0, False) and "changes nothing" in obs
    obs, reward, *_ = env.step(boxed("left"))  # 4+4 = 8: half the way from 4 to 16 in log scale
    assert reward == pytest.approx(0.5)


def test_2048_game_over_when_no_move_is_left():
    env = Game2048Env(target_tile=2048, max_turns=100)
    env.reset(seed=0)
    # after sliding left, whichever tile (2 or 4) lands in the corner, nothing can merge
    board = [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 8], [0, 8, 16, 32]]
    env.set_state({**env.get_state(), "board": board, "best": 32})
    obs, reward, terminated, truncated, info = env.step(boxed("left"))
    assert (reward, terminated, truncated, info["correct"]) == (0.0, True, False, False)
    assert "game over" in obs


# -- Sokoban ---------------------------------------------------------------------------
def _level(rows, max_turns):
    env = SokobanEnv(dim_room=(6, 6), num_boxes=2, max_turns=20)
    env.reset(seed=0)
    cells = {(r, c): ch for r, row in enumerate(rows) for c, ch in enumerate(row)}

    def where(symbol):
        return [list(cell) for cell, ch in cells.items() if ch == symbol]

    env.set_state({
        **env.get_state(),
        "dim_room": [len(rows), len(rows[0])],
        "num_boxes": len(where("X")),
        "max_turns": max_turns,
        "walls": where("#"),
        "goals": where("O"),
        "boxes": where("X"),
        "player": where("P")[0],
    })
    return env


def test_sokoban_pushes_one_box_and_never_two():
    env = _level(["#######", "#PXX_O#", "#__XO_#", "#O____#", "#######"], max_turns=4)
    obs, reward, terminated, *_ = env.step(boxed("right"))  # two boxes in a row do not move
    assert (reward, terminated) == (0.0, False) and "cannot move" in obs
    env.step(boxed("down"))
    obs, *_ = env.step(boxed("right"))
    assert "pushed" not in obs
    obs, reward, terminated, truncated, _ = env.step(boxed("right"))  # a box onto a goal, last turn
    assert "pushed" in obs and "√" in obs
    assert (terminated, truncated) == (True, True) and reward == pytest.approx(1 / 3)


def test_generated_sokoban_levels_start_unsolved_inside_walls():
    env = gem.make("game:Sokoban-v0-hard")
    for seed in range(5):
        env.reset(seed=seed)
        rows, cols = env.dim_room
        border = {(r, c) for r in range(rows) for c in range(cols) if r in (0, rows - 1) or c in (0, cols - 1)}
        assert border <= env.walls
        assert len(env.boxes) == len(env.goals) == 4 and not env.boxes & env.goals
        assert 0 < env.optimal_moves <= env.max_turns
