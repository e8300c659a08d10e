"""Wrappers that count: episode tracking and a time limit."""

from __future__ import annotations

from typing import Any

from gem.core import Env, StepResult, Wrapper


class EpisodeTrackingWrapper(Wrapper):
    """Adds the step count and the return so far to every step's info, and at the end of
    an episode ``info["episode"] = {"length": ..., "return": ...}``.

    The keys are the reference package's (``step_counter``, ``cumulative_rewards``; after
    a reset also ``prev_ep_step_counter``, ``prev_ep_cumulative_rewards``) and ours
    (``step``, ``cumulative_reward``), with the same values.
    """

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.step_count = 0
        self.cumulative_reward = 0.0

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        previous = {"prev_ep_step_counter": self.step_count, "prev_ep_cumulative_rewards": self.cumulative_reward}
        self.step_count, self.cumulative_reward = 0, 0.0
        obs, info = self.env.reset(seed=seed, **kwargs)
        return obs, {**info, **self._counters(), **previous}

    def _counters(self) -> dict[str, Any]:
        return {
            "step": self.step_count,
            "cumulative_reward": self.cumulative_reward,
            "step_counter": self.step_count,
            "cumulative_rewards": self.cumulative_reward,
        }

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.step_count += 1
        self.cumulative_reward += float(reward)
        info = {**info, **self._counters()}
        if terminated or truncated:
            info["episode"] = {"length": self.step_count, "return": self.cumulative_reward}
        return obs, reward, terminated, truncated, info

    def get_wrapper_state(self) -> dict[str, Any]:
        return {"step_count": self.step_count, "cumulative_reward": self.cumulative_reward}

    def set_wrapper_state(self, state: dict[str, Any]) -> None:
        self.step_count = int(state.get("step_count", 0))
        self.cumulative_reward = float(state.get("cumulative_reward", 0.0))


class TimeLimit(Wrapper):
    """Truncates the episode after ``max_steps`` steps (``info["time_limit"] = True``)."""

    def __init__(self, env: Env, max_steps: int) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        super().__init__(env)
        self.max_steps = max_steps
        self.elapsed = 0

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self.elapsed = 0
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.elapsed += 1
        if self.elapsed >= self.max_steps and not terminated and not truncated:
            truncated = True
            info = {**info, "time_limit": True}
        return obs, reward, terminated, truncated, info

    def get_wrapper_state(self) -> dict[str, Any]:
        return {"elapsed": self.elapsed}

    def set_wrapper_state(self, state: dict[str, Any]) -> None:
        self.elapsed = int(state.get("elapsed", 0))


class EncapsulateWrapper(Wrapper):
    """Puts the agent's action inside ``prefix``/``suffix`` (e.g. ``\\boxed{...}``)
    unless it already contains the prefix: for agents that answer bare."""

    def __init__(self, env: Env, prefix: str, suffix: str) -> None:
        super().__init__(env)
        self.prefix, self.suffix = prefix, suffix

    def step(self, action: str) -> StepResult:
        if not isinstance(action, str) or self.prefix not in action:
            action = f"{self.prefix}{action}{self.suffix}"
        return self.env.step(action)
