"""The Gymnasium bridge passes Gymnasium's own env checker on every game and a math env.

Runs in `nox -s "integration(framework='gymnasium')"` (gymnasium plus the games and
math suites installed); skipped where gymnasium is not installed.
"""

import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

import gem  # noqa: E402
from gem_integrations.gymnasium import AnyText, GymnasiumEnv  # noqa: E402

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


def test_gymnasium_make_with_the_suite_as_namespace():
    import gem_integrations.gymnasium as bridge

    gymnasium.register_envs(bridge)
    env = gymnasium.make("game/Wordle-v0-easy")
    obs, _ = env.reset(seed=4)
    assert obs == gem.make("game:Wordle-v0-easy").reset(seed=4)[0]
    assert env.step("no word")[1] == pytest.approx(-0.1)  # GEM's format error, through Gymnasium's wrappers
    small = gymnasium.make("game/GuessTheNumber-v0", min_number=1, max_number=3, max_turns=2)
    assert "between 1 and 3" in small.reset(seed=0)[0]
    assert isinstance(gymnasium.make("math/Arithmetic-v0-easy").unwrapped, GymnasiumEnv)


def test_every_gem_id_is_in_gymnasiums_registry():
    from gymnasium.envs.registration import parse_env_id

    from gem_integrations.gymnasium import gymnasium_id, register_gymnasium_envs

    assert register_gymnasium_envs() == []  # the import registered them all
    for env_id in gem.list_envs():
        namespace, _, _ = parse_env_id(gymnasium_id(env_id))
        assert namespace == env_id.split(":")[0]
        assert gymnasium.spec(gymnasium_id(env_id)).kwargs == {"env": env_id}


# the old path too: scripts written when the adapters lived in gem-core name it
@pytest.mark.parametrize("module", ["gem_integrations.gymnasium", "gem.integrations.gymnasium"])
def test_one_string_form_imports_the_bridge_itself(module):
    import subprocess
    import sys

    code = (
        "import gymnasium\n"
        f"env = gymnasium.make('{module}:game/GuessTheNumber-v0-easy')\n"
        "print(env.reset(seed=0)[0].splitlines()[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == gem.make("game:GuessTheNumber-v0-easy").reset(seed=0)[0].splitlines()[0]


def test_the_gem_id_as_written_is_read_as_a_module_by_gymnasium():
    # gymnasium.make imports what comes before ":" first: the reason for the namespace form
    with pytest.raises(ModuleNotFoundError, match="'game'"):
        gymnasium.make("game:Wordle-v0-easy")


@pytest.mark.parametrize("fault", ["raise", "hang", "die"])
def test_a_failing_step_ends_the_episode_truncated_and_the_next_reset_plays_on(fault):
    """Gymnasium's loop (reset, step until terminated or truncated) goes on past an env that raises,
    hangs past step_timeout or whose worker process dies: that step ends the episode truncated with
    info["failure"], and the next episode plays on a fresh env as it would have."""
    from adapter_kit import FAULT_STEP_TIMEOUT, FAULTS, assert_ended_by

    from gem.testing.envs import FaultyEnv

    action, host, _ = FAULTS[fault]
    env, twin = GymnasiumEnv(FaultyEnv, step_timeout=FAULT_STEP_TIMEOUT, host=host), FaultyEnv()
    try:
        assert env.reset(seed=2) == twin.reset(seed=2)
        obs, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert_ended_by(info, fault)
        assert env.reset(seed=3) == twin.reset(seed=3)
        assert env.step("\\boxed{4}") == twin.step("\\boxed{4}")
    finally:
        env.close()
