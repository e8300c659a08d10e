"""The Gymnasium bridge passes Gymnasium's own env checker on every game and a math env.

Runs in `nox -s "integration(framework='gymnasium')"` (gymnasium plus the games and
math suites installed); skipped where gymnasium is not installed.
"""

import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

import gem  # noqa: E402
from gem.integrations.gymnasium import AnyText, GymnasiumEnv  # noqa: E402

GAME_IDS = gem.list_envs("game:*")


def test_games_are_installed():
    assert len(GAME_IDS) > 10, "the games suite must be installed for these tests"


@pytest.mark.parametrize("env_id", [*GAME_IDS, "math:Arithmetic-v0-easy"])
def test_check_env_passes(env_id):
    env = GymnasiumEnv(env_id)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_any_text_contains_every_string():
    space = AnyText()
    assert space.contains("") and space.contains("#\u2588 @ \x00 " * 200)
    assert not space.contains(3) and not space.contains(None)
    assert space.contains(space.sample())


def test_seeded_episode_and_rewards_pass_through():
    env = GymnasiumEnv("game:GuessTheNumber-v0-easy")
    obs, info = env.reset(seed=3)
    base = gem.make("game:GuessTheNumber-v0-easy")
    assert obs == base.reset(seed=3)[0]
    secret = base.unwrapped.secret
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{secret}}}")
    assert (reward, terminated) == (1.0, True) and isinstance(reward, float)
    # junk is a legal action: the env's format error, not an exception
    env.reset(seed=3)
    assert env.step("no number here")[1] == pytest.approx(-0.1)


def test_make_kwargs_and_non_text_observation():
    env = GymnasiumEnv("game:GuessTheNumber-v0", min_number=1, max_number=3, max_turns=2)
    assert "between 1 and 3" in env.reset(seed=0)[0]
    from gem.wrappers import HistoryWrapper

    wrapped = GymnasiumEnv(lambda: HistoryWrapper(gem.make("game:GuessTheNumber-v0-easy"), mode="messages"))
    with pytest.raises(TypeError, match="needs text"):
        wrapped.reset(seed=0)
