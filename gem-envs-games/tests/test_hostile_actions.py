"""Hostile actions: a megabyte built to make a move parser backtrack, overflow ``int()``
or echo itself back is still an ordinary action (a format error or a wasted turn).

Each step runs under a hang guard (SIGALRM, :data:`HANG_GUARD_S`): it is there so a
parser gone quadratic fails this file instead of stalling the whole suite, not to time
anything; how the cost grows with the length of the action is measured by
``bench/bench_games.py --hostile``, which compares n against 4n.
"""

from __future__ import annotations

import math
import signal
from contextlib import contextmanager

import pytest

import gem
from gem_envs_games.solvers import solver_for

HANG_GUARD_S = 60
MB = 1 << 20
HALF = MB // 2

#: (name, action) pairs shaped against every grammar the games parse: long runs of
#: separators between fields, huge numbers, many fields, braces that never close
HOSTILE = [
    # the Sudoku shapes: a 5000-digit number, and spaces a backtracking regex splits
    ("sudoku_int_digits", "\\boxed{1 1 " + "9" * 5000 + "}"),
    ("sudoku_spaces", "\\boxed{1" + " " * HALF + "1" + " " * HALF + "x}"),
    ("huge_number", "\\boxed{" + "9" * MB + "}"),
    ("many_numbers", "\\boxed{" + "1 " * HALF + "x}"),
    ("many_numbers_valid", "\\boxed{" + "1 " * HALF + "}"),
    ("commas", "\\boxed{" + "1," * HALF + "}"),
    ("command_spaces", "\\boxed{reveal" + " " * HALF + "1" + " " * HALF + "x}"),
    ("towers_spaces", "\\boxed{A" + " " * MB + "x}"),
    ("towers_words", "\\boxed{A " + "to " * (MB // 3) + "B}"),
    ("letters", "\\boxed{" + "a " * HALF + "1}"),
    ("one_word", "\\boxed{" + "E" * MB + "}"),
    ("direction_padding", "\\boxed{" + " " * MB + "up" + " " * 10 + "x}"),
    ("brackets", "\\boxed{" + "[(" * HALF + "1 2}"),
    ("open_braces", "\\boxed{" + "{" * MB),
    ("unclosed_boxes", "\\boxed{1" * (MB // 8)),
    ("nested_boxes", "\\boxed{" * (MB // 8) + "}" * (MB // 8)),
]

GAME_IDS = [env_id for env_id in gem.list_envs("game:*") if env_id.endswith("-easy")]


@contextmanager
def hang_guard(seconds: int = HANG_GUARD_S):
    def stop(signum, frame):
        raise TimeoutError(f"a step did not return within {seconds} s: a parser is not linear")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_a_hostile_megabyte_is_an_ordinary_action(env_id):
    env = gem.make(env_id)
    for name, action in HOSTILE:
        env.reset(seed=0)
        with hang_guard():
            obs, reward, terminated, truncated, info = env.step(action)
        assert math.isfinite(reward), name
        # no box with a legal move in it: the episode ends with GEM's format-error
        # reward; or the box parses and the move is invalid (off the board, wrong
        # length), which wastes the turn and earns 0
        if terminated:
            assert (reward, info["correct"]) == (-0.1, False), (name, reward)
            assert "game is over" in obs, name
        else:
            assert reward == 0.0, (name, reward)
        # the env never echoes the megabyte back into the episode's text
        assert len(obs) + len(info.get("suffix", "")) < 10_000, name


def test_the_sudoku_shapes_of_the_report_are_format_errors():
    env = gem.make("game:Sudoku-v0-hard")
    env.reset(seed=0)
    with hang_guard():
        # a 5000-digit number reads as off the grid (int() of it would raise): the turn is lost
        assert env.step("\\boxed{1 1 " + "9" * 5000 + "}")[1:3] == (0.0, False)
        assert env.step("\\boxed{1" + " " * 200 + "1" + " " * 200 + "x}")[1:3] == (-0.1, True)


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_hostile_text_around_a_real_move_does_not_change_it(env_id):
    """A megabyte of junk before the last box leaves the move in that box as it was."""
    env, twin = gem.make(env_id), gem.make(env_id)
    obs, info = env.reset(seed=3)
    twin.reset(seed=3)
    move = solver_for(env).act(obs, info)
    junk = "\\boxed{" + "{" * HALF + " 1 " * (HALF // 3)
    with hang_guard():
        assert env.step(junk + move) == twin.step(move)


def test_every_sokoban_reset_builds_a_level():
    """The random preset's seed 100233 exhausted the room generator and raised; every
    seed now gets a level, as deterministic as any other and solvable in time."""
    env = gem.make("game:Sokoban-v0-random")
    obs, info = env.reset(seed=100233)
    assert env.boxes and len(env.boxes) == env.num_boxes and not env.boxes <= env.goals
    assert 0 < env.optimal_moves <= env.max_turns
    first = env.get_state()
    env.reset(seed=100233)
    assert env.get_state() == first
    solver = solver_for(env)
    solver.reset()
    for _ in range(env.max_turns):
        obs, reward, terminated, truncated, info = env.step(solver.act(obs, info))
        if terminated or truncated:
            break
    assert info["correct"]
