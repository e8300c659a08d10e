"""Property tests: whatever the agent writes, the word and logic games never raise, give
finite rewards, and end within their turn limit."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem

FAMILIES = ("GuessTheNumber", "Mastermind", "Minesweeper", "Wordle", "Hangman", "Crosswords", "WordSearch")
IDS = sorted(i for i in gem.list_envs("game:") if i.split(":")[1].split("-v")[0] in FAMILIES)

#: text that looks like a move of some game, so fuzzing reaches the move logic
_MOVE_LIKE = st.from_regex(
    r"(reveal|flag|REVEAL|x)? ?\[?\(?-?[0-9]{1,3}[ ,]+[0-9]{1,3}\)?( [0-9]{1,2}| [A-Za-z])?( [0-9]{1,2})?\]?"
    r"|[A-Za-z]{1,8}|[0-9 ]{1,12}",
    fullmatch=True,
)
_ACTION = st.one_of(
    st.text(max_size=40),
    st.text(max_size=20).map(lambda t: f"\\boxed{{{t}}}"),
    _MOVE_LIKE.map(lambda t: f"I think \\boxed{{{t}}}"),
    st.sampled_from(["", "\\boxed{}", "\\boxed{\\boxed{1}}", "}\\boxed{", "\\boxed{0}", "\\boxed{9" * 30 + "}"]),
)


@pytest.mark.parametrize("env_id", IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), actions=st.lists(_ACTION, max_size=30))
def test_any_text_is_a_legal_action(env_id, seed, actions):
    env = gem.make(env_id)
    env.reset(seed=seed)
    limit = env.max_turns
    steps, done = 0, False
    # the fuzzed actions first, then the env's own random moves until the episode ends
    moves = iter(actions)
    while not done:
        action = next(moves, None)
        if action is None:
            action = env.sample_random_action()
        obs, reward, terminated, truncated, info = env.step(action)
        steps += 1
        assert isinstance(obs, str) and isinstance(info, dict)
        assert math.isfinite(reward) and -0.1 <= reward <= 1.0
        done = terminated or truncated
        assert steps <= limit, f"{env_id} ran past its {limit} turns"
    # once over, the env stays over until reset
    assert env.step(env.sample_random_action())[2]
