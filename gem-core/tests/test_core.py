import json
import random

import numpy as np
import pytest

import gem
from gem.testing.envs import CountEnv


def test_reset_seed_determines_the_episode():
    targets = []
    for _ in range(2):
        env = CountEnv(high=10**9)
        env.reset(seed=7)
        targets.append(env.target)
    assert targets[0] == targets[1]
    env.reset(seed=8)
    assert env.target != targets[0]


def test_reset_without_seed_continues_the_envs_own_stream():
    a, b = CountEnv(high=10**9), CountEnv(high=10**9)
    a.reset(seed=1)
    b.reset(seed=1)
    seq_a = [a.reset()[0] and a.target for _ in range(5)]
    seq_b = [b.reset()[0] and b.target for _ in range(5)]
    assert seq_a == seq_b
    assert len(set(seq_a)) == 5


def test_envs_never_touch_global_rng():
    random.seed(123)
    np.random.seed(123)
    before = random.random(), np.random.random()
    random.seed(123)
    np.random.seed(123)
    env = CountEnv()
    env.reset()
    env.reset(seed=3)
    env.step(env.sample_random_action())
    assert (random.random(), np.random.random()) == before


def test_state_is_json_and_resumes_exactly():
    env = CountEnv(high=100, max_turns=10)
    env.reset(seed=5)
    env.step("\\boxed{50}")
    state = json.loads(json.dumps(env.get_state()))
    expected = [env.step(env.sample_random_action()) for _ in range(3)]
    env.set_state(state)
    assert [env.step(env.sample_random_action()) for _ in range(3)] == expected


def test_spawn_copies_constructor_arguments_and_optionally_state():
    env = CountEnv(high=77, max_turns=9)
    env.reset(seed=2)
    env.step("\\boxed{1}")
    fresh = env.spawn()
    assert (fresh.high, fresh.max_turns) == (77, 9) and fresh is not env
    twin = env.spawn(same_state=True)
    assert (twin.target, twin.turn) == (env.target, env.turn)
    bigger = env.spawn(high=500)
    assert bigger.high == 500 and bigger.max_turns == 9


def test_wrapper_delegates_at_lookup_time_and_never_copies():
    env = CountEnv()
    wrapped = gem.Wrapper(env)
    env.reset(seed=0)
    env.custom = "added later"
    assert wrapped.custom == "added later"
    assert wrapped.target == env.target
    assert "target" not in wrapped.__dict__
    assert wrapped.unwrapped is env
    with pytest.raises(AttributeError):
        wrapped.does_not_exist  # noqa: B018


def test_wrapper_state_includes_inner_env_and_spawn_rewraps():
    from gem.wrappers import EpisodeTrackingWrapper

    env = EpisodeTrackingWrapper(CountEnv(high=50, max_turns=10))
    env.reset(seed=1)
    env.step("\\boxed{3}")
    state = json.loads(json.dumps(env.get_state()))
    assert state["wrapper"]["step_count"] == 1
    twin = env.spawn(same_state=True)
    assert isinstance(twin, EpisodeTrackingWrapper) and twin.step_count == 1
    assert twin.unwrapped.target == env.unwrapped.target
    twin.set_state(state)
    assert twin.step_count == 1


def test_async_defaults_run_the_sync_calls():
    import asyncio

    env = CountEnv()

    async def go():
        obs, _ = await env.areset(seed=0)
        return obs, await env.astep(f"\\boxed{{{env.target}}}")

    obs, (_, reward, terminated, _, _) = asyncio.run(go())
    assert "Guess" in obs and reward == 1.0 and terminated


def test_seed_must_be_an_int():
    with pytest.raises(TypeError, match="seed must be an int"):
        CountEnv().reset(seed="7")


def test_seeded_streams_are_those_of_random_and_default_rng_whatever_is_drawn_first():
    # the numpy generator is built on first use: its stream must not depend on when
    class Bare(gem.Env):  # reset() only seeds: no draws of its own
        def step(self, action):
            return "", 0.0, True, False, {}

    seed = 2**40 + 3
    for numpy_first in (False, True):
        env = Bare()
        env.reset(seed=seed)
        expected_py, expected_np = random.Random(seed), np.random.default_rng(seed)
        if numpy_first:
            assert env.np_random.random() == expected_np.random()
        assert env.rng.random() == expected_py.random()
        state = json.loads(json.dumps(env.rng_state()))
        after = (env.rng.random(), env.np_random.random())
        assert after == (expected_py.random(), expected_np.random())
        env.set_rng_state(state)
        assert (env.rng.random(), env.np_random.random()) == after
    with pytest.raises(ValueError):  # numpy refuses negative seeds at reset, not at the first draw
        Bare().reset(seed=-1)
