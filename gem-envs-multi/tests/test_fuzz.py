"""Whatever either agent writes, the games never raise, pay bounded finite rewards and end."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem
from gem.multiagent import make_game
from gem.testing import ADVERSARIAL_ACTIONS

IDS = ["multi:TicTacToe-v0", "multi:Bargaining-v0", "multi:Signalling-v0", "multi:PrisonersDilemma-v0"]
_MOVE_LIKE = st.from_regex(r"(propose )?[0-9]{1,3}( [0-9]{1,3}){0,3}|accept|cooperate|defect|[a-z]{1,8}( [a-z]{1,8})?",
                           fullmatch=True)
_ACTION = st.one_of(
    st.text(max_size=40),
    st.text(max_size=20).map(lambda t: f"\\boxed{{{t}}}"),
    _MOVE_LIKE.map(lambda t: f"my move: \\boxed{{{t}}}"),
    st.sampled_from(ADVERSARIAL_ACTIONS[:20]),
)


@pytest.mark.parametrize("env_id", IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), actions=st.lists(_ACTION, max_size=30))
def test_any_text_from_any_agent(env_id, seed, actions):
    game = make_game(env_id)
    game.reset(seed=seed)
    moves = iter(actions)
    steps = 0
    while not game.done:
        step = {a: next(moves, None) or game.sample_random_action(a) for a in game.active_agents}
        obs, rewards, terms, truncs, infos = game.step(step)
        steps += 1
        assert all(isinstance(o, str) for o in obs.values())
        assert all(math.isfinite(r) and -0.1 <= r <= 1.0 for r in rewards.values())
        assert steps <= game.max_steps
    assert "The game is over" in game.observe(game.possible_agents[0])


@pytest.mark.parametrize("env_id", IDS)
def test_adversarial_strings_through_the_single_agent_view(env_id):
    env = gem.make(env_id)
    for action in ADVERSARIAL_ACTIONS:
        env.reset(seed=1)
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and -0.1 <= reward <= 1.0
        if "\\boxed{" not in action:
            assert terminated and reward == -0.1 and info["format_error"]
