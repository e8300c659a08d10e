"""Property tests: any text is a legal action for the puzzle games, rewards stay
finite and bounded, and well-formed play always ends by the turn limit."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem

DIRECTIONS = st.sampled_from(["up", "down", "left", "right", "UP", " left "])
#: well-formed moves per game (many of them illegal in the position: that is the point)
MOVES = {
    "TowerofHanoi": st.tuples(st.sampled_from("ABC"), st.sampled_from("ABCab")).map(" ".join),
    "FifteenPuzzle": DIRECTIONS,
    "Game2048": DIRECTIONS,
    "Sokoban": DIRECTIONS,
    "Sudoku": st.tuples(*[st.integers(0, 10)] * 3).map(lambda t: " ".join(map(str, t))),
}
IDS = [
    f"game:{family}-v0{preset}"
    for family in MOVES
    for preset in ("-easy", "-hard", "-random")
]
FUZZ = settings(max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _family(env_id: str) -> str:
    return env_id.split(":")[1].split("-v")[0]


def _any_action(env_id: str) -> st.SearchStrategy[str]:
    boxed = MOVES[_family(env_id)].map(lambda m: f"I will play \\boxed{{{m}}}")
    return st.one_of(boxed, st.text(max_size=40), st.text(max_size=20).map(lambda t: f"\\boxed{{{t}}}"))


@pytest.mark.parametrize("env_id", IDS)
def test_any_text_is_a_legal_action(env_id):
    @FUZZ
    @given(seed=st.integers(0, 2**31), actions=st.lists(_any_action(env_id), min_size=1, max_size=12))
    def run(seed, actions):
        env = gem.make(env_id)
        env.reset(seed=seed)
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            assert isinstance(obs, str) and isinstance(info, dict)
            assert math.isfinite(reward) and -0.1 <= reward <= 1.0
            if terminated or truncated:
                break

    run()


@pytest.mark.parametrize("env_id", IDS)
def test_well_formed_play_ends_by_the_turn_limit(env_id):
    @FUZZ
    @given(seed=st.integers(0, 2**31), moves=st.lists(MOVES[_family(env_id)], min_size=1, max_size=8))
    def run(seed, moves):
        env = gem.make(env_id)
        env.reset(seed=seed)
        total = 0.0
        for turn in range(1, env.max_turns + 1):
            _, reward, terminated, truncated, info = env.step(f"\\boxed{{{moves[turn % len(moves)]}}}")
            total += reward
            if terminated or truncated:
                break
        assert terminated or truncated, "no end after max_turns well-formed moves"
        assert not truncated or (turn == env.max_turns and not info["correct"])
        if info["correct"]:
            assert total == pytest.approx(1.0)
        assert -1e-9 <= total <= 1.0 + 1e-9

    run()
