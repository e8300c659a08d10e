"""Every env's reward stays in the range it declares, enforced once in gem.Env (issue 33,
finding 2: ``rg:`` envs passed a poisoned scorer's 1e6 straight to the trainer)."""

from __future__ import annotations

import asyncio
import math

import pytest

import gem
from gem.reward_range import REWARD_ERROR, graded_range
from gem.testing import CheckEnvError, check_env


class Scored(gem.Env):
    """Returns whatever reward it is told to: a grader an answer took over."""

    reward_range = (0.0, 1.0)

    def __init__(self, reward: object = 1.0) -> None:
        self.reward = reward

    def reset(self, seed: int | None = None, **kwargs: object) -> tuple[str, dict]:
        super().reset(seed)
        return "q", {}

    def step(self, action: str) -> tuple:
        return "", self.reward, True, False, {"correct": True}

    def sample_random_action(self) -> str:
        return "a"


@pytest.mark.parametrize("reward", [1e6, -3.0, math.nan, math.inf, 1.0000001])
def test_a_reward_outside_the_declared_range_is_a_failure_not_a_reward(reward: float) -> None:
    _, got, terminated, truncated, info = Scored(reward).step("x")
    assert got == 0.0 and terminated and not truncated
    assert "outside its declared reward_range [0.0, 1.0]" in info[REWARD_ERROR]
    assert info["correct"]  # the env's own info is kept beside the error


@pytest.mark.parametrize("reward", [0.0, 0.5, 1.0, 1, True])
def test_a_reward_inside_the_range_passes_unchanged(reward: object) -> None:
    result = Scored(reward).step("x")
    assert result[1] is reward and REWARD_ERROR not in result[4]


def test_a_subclass_step_is_guarded_too_and_async_steps_as_well() -> None:
    class Louder(Scored):
        def step(self, action: str) -> tuple:
            obs, reward, *rest = super().step(action)
            return (obs, reward * 10, *rest)

        async def astep(self, action: str) -> tuple:
            return self.step(action)

    assert Louder(0.5).step("x")[1] == 0.0
    assert asyncio.run(Louder(0.5).astep("x"))[1] == 0.0
    assert asyncio.run(Scored(7.0).astep("x"))[1] == 0.0  # the default astep runs the guarded step


def test_the_failure_reward_is_zero_or_the_nearest_end() -> None:
    class Negative(Scored):
        reward_range = (-2.0, -1.0)

    assert Negative(5.0).step("x")[1] == -1.0
    assert graded_range(-0.1) == (-0.1, 1.0) and graded_range(0.0) == (0.0, 1.0)


def test_unbounded_by_default_and_wrappers_do_not_narrow() -> None:
    class Free(gem.Env):
        def step(self, action: str) -> tuple:
            return "", 1e9, True, False, {}

    assert Free().reward_range == (-math.inf, math.inf)
    assert Free().step("x")[1] == 1e9
    assert Free().step("x") and Scored(0.5).reward_range == (0.0, 1.0)


def test_check_env_reports_an_env_that_leaves_its_range() -> None:
    with pytest.raises(CheckEnvError, match="outside its declared reward_range"):
        check_env(Scored(2.0), skip=["determinism", "state", "spawn"])

    class Empty(Scored):
        reward_range = (1.0, 0.0)

    with pytest.raises(CheckEnvError, match="is empty"):
        check_env(Empty(0.5), skip=["robustness", "determinism", "state", "spawn", "async"])


def test_every_registered_graded_family_declares_its_range() -> None:
    """The suites' graded single-turn envs (math, reasoning-gym, code, QA) declare [format-error, 1]."""
    checked = 0
    for env_id in ("eval:GSM8K", "rg:leg_counting", "code:MBPP", "eval:NaturalQuestions"):
        try:
            env = gem.make(env_id)
        except Exception:  # the suite is not installed in this venv
            continue
        low, high = env.unwrapped.reward_range
        assert high == 1.0 and low == min(0.0, env.unwrapped.format_error_reward)
        checked += 1
    if not checked:
        pytest.skip("no graded suite installed")
