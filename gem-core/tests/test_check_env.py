"""check_env passes a conforming env and catches each kind of violation."""

import random

import pytest

from gem.conventions import FORMAT_ERROR_REWARD
from gem.testing import CheckEnvError, check_env
from gem.testing.envs import BusyEnv, CountEnv


def test_conforming_envs_pass():
    check_env(CountEnv())
    check_env(BusyEnv(work=10))


class RaisesOnGarbage(CountEnv):
    def step(self, action):
        int(action.strip("\\boxed{}"))
        return super().step(action)


class UsesGlobalRandom(CountEnv):
    def reset(self, seed=None, **kwargs):
        obs, info = super().reset(seed)
        random.random()
        return obs, info


class IgnoresSeed(CountEnv):
    def reset(self, seed=None, **kwargs):
        obs, info = super().reset(None)
        return obs, info


class NoState(CountEnv):
    def get_state(self):
        return {"target": self.target, "turn": self.turn, "self": self}


class LosesState(CountEnv):
    def set_state(self, state):
        self.turn = state["turn"]  # forgets target and rng


class NeverEnds(CountEnv):
    def step(self, action):
        obs, r, t, tr, info = super().step(action)
        return obs, r, False, False, info


class BadReward(CountEnv):
    def step(self, action):
        obs, r, t, tr, info = super().step(action)
        return obs, float("nan"), t, tr, info


class FormatErrorGoesOn(CountEnv):
    """Flags a format error but keeps the episode running."""

    def step(self, action):
        obs, r, t, tr, info = super().step(action)
        return obs, r, t and not info["format_error"], tr, info


class FormatErrorNotABool(CountEnv):
    def step(self, action):
        obs, r, t, tr, info = super().step(action)
        return obs, r, t, tr, {**info, "format_error": "yes" if info["format_error"] else ""}


def test_count_env_follows_the_format_error_convention():
    env = CountEnv()
    env.reset(seed=0)
    assert env.step("\\boxed{1}")[4]["format_error"] is False
    _, reward, terminated, _, info = env.step("no box")
    assert (reward, terminated, info["format_error"]) == (FORMAT_ERROR_REWARD, True, True)


@pytest.mark.parametrize(
    "env, check",
    [
        (RaisesOnGarbage(), "robustness"),
        (UsesGlobalRandom(), "global_rng"),
        (IgnoresSeed(high=10**9), "determinism"),
        (NoState(), "state"),
        (LosesState(high=10**9, max_turns=50), "state"),
        (NeverEnds(), "api"),
        (BadReward(), "api"),
        (FormatErrorGoesOn(), "robustness"),
        (FormatErrorNotABool(), "api"),
    ],
)
def test_each_violation_is_caught_and_named(env, check):
    with pytest.raises(CheckEnvError, match=rf"check_env\[{check}\]"):
        check_env(env, max_episode_steps=50)


def test_skip_lists_checks_to_leave_out():
    check_env(NoState(), skip=("state",))
