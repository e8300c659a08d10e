"""FifteenPuzzle's scramblers: the reference's ``init_algo`` / ``mc_rand_moves`` arguments
with its meaning, on the env's own RNG."""

from __future__ import annotations

import functools
from collections import deque

import pytest

import gem
from gem_envs_games.fifteen_puzzle import DIRECTIONS, FifteenPuzzleEnv, goal_tiles, is_solvable, slide


def reachable(rows: int) -> set[tuple[int, ...]]:
    """Every board slides can reach from the solved one (breadth-first)."""
    start = tuple(goal_tiles(rows))
    seen, queue = {start}, deque([start])
    while queue:
        board = queue.popleft()
        for direction in DIRECTIONS:
            tiles = list(board)
            if slide(tiles, rows, direction) and tuple(tiles) not in seen:
                seen.add(tuple(tiles))
                queue.append(tuple(tiles))
    return seen


def test_the_reference_tests_constructor_call_builds_a_walked_board() -> None:
    # the call the reference's tests/test_env/test_fifteen.py makes
    env = FifteenPuzzleEnv(max_turns=100, num_rows=4, init_algo="monte_carlo", mc_rand_moves=20)
    goal = goal_tiles(4)
    for seed in range(20):
        env.reset(seed=seed)
        tiles = env.tiles
        assert is_solvable(tiles, 4) and tiles != goal
        # 20 slides move tiles at most 20 cells in all
        distance = sum(abs(i // 4 - (t - 1) // 4) + abs(i % 4 - (t - 1) % 4) for i, t in enumerate(tiles) if t)
        assert distance <= 20


@pytest.mark.parametrize("rows", [2, 3])
def test_is_solvable_agrees_with_search(rows: int) -> None:
    import itertools
    import random

    solvable = reachable(rows)
    boards = itertools.permutations(range(rows * rows))
    if rows == 3:
        rng = random.Random(0)
        boards = (tuple(rng.sample(range(9), 9)) for _ in range(3000))
    for board in boards:
        assert is_solvable(list(board), rows) == (board in solvable)


def test_pure_random_draws_every_solvable_board() -> None:
    env = FifteenPuzzleEnv(num_rows=2, max_turns=10, init_algo="pure_random")
    solvable = reachable(2) - {tuple(goal_tiles(2))}
    drawn = set()
    for seed in range(300):
        env.reset(seed=seed)
        drawn.add(tuple(env.tiles))
    assert drawn == solvable


def test_pure_random_boards_are_solvable_and_reproducible() -> None:
    env = gem.make("game:FifteenPuzzle-v0-hard", init_algo="pure_random")
    boards = []
    for seed in (3, 4, 3):
        env.reset(seed=seed)
        boards.append(list(env.tiles))
        assert is_solvable(env.tiles, 4)
    assert boards[0] == boards[2] != boards[1]
    state = env.get_state()
    child = env.spawn(same_state=True)
    assert child.tiles == env.tiles and child.init_algo == "pure_random"
    env.step("\\boxed{up}")
    env.set_state(state)
    assert env.tiles == boards[2]


def test_the_default_scramble_still_fits_the_turn_limit() -> None:
    env = FifteenPuzzleEnv(num_rows=3, max_turns=6)
    for seed in range(30):
        env.reset(seed=seed)
        assert tuple(env.tiles) in reachable_within(3, 6)


@functools.cache
def reachable_within(rows: int, moves: int) -> frozenset[tuple[int, ...]]:
    """Every board at most ``moves`` slides from the solved one."""
    seen = frontier = {tuple(goal_tiles(rows))}
    for _ in range(moves):
        step = set()
        for board in frontier:
            for direction in DIRECTIONS:
                tiles = list(board)
                if slide(tiles, rows, direction):
                    step.add(tuple(tiles))
        frontier, seen = step - seen, seen | step
    return frozenset(seen)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"init_algo": "bfs"}, "init_algo must be one of 'monte_carlo', 'pure_random'"),
        ({"mc_rand_moves": 0}, "mc_rand_moves must be at least 1"),
    ],
)
def test_bad_scramble_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FifteenPuzzleEnv(**kwargs)
