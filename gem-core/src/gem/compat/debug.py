"""Print an episode step by step: the reference package's debugging helpers.

They take a single env or a vector env and a ``policy(observation) -> action`` (a list of
actions for a vector env), play until the episode ends (all envs, for a vector env) or
``max_steps`` steps, and print each step's observation, action and reward.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pprint import pprint
from typing import Any

import numpy as np


def ppprint(x: Any) -> None:
    """Pretty-print ``x``; a list or tuple item by item, numbered."""
    if isinstance(x, (list, tuple)):
        for i, item in enumerate(x):
            print("-" * 5, f"{i + 1}/{len(x)}:")
            pprint(item)
            print("")
    else:
        pprint(x)


def _section(title: str, value: Any) -> None:
    print("-" * 10, title, "-" * 10)
    ppprint(value)


def _done(terminated: Any, truncated: Any) -> bool:
    return bool(np.all(np.logical_or(terminated, truncated)))


def _report(step: int, sections: dict[str, Any], terminated: Any, truncated: Any) -> None:
    print("=" * 30)
    print(f"Step {step}")
    for title, value in sections.items():
        _section(title, value)
    print("terminated: ", terminated, "truncated: ", truncated)
    print("=" * 30)


def run_and_print_episode(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """Play ``env`` with ``policy``, printing every step (``ignore_done``: go on to ``max_steps``)."""
    started = time.time()
    obs, _ = env.reset()
    step = 0
    while True:
        step += 1
        action = policy(obs)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        _report(step, {"observation": obs, "action": action, "reward": reward}, terminated, truncated)
        obs = next_obs
        if (not ignore_done and _done(terminated, truncated)) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - started:.2f} seconds")


def run_and_print_episode_with_selective_step(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """Like :func:`run_and_print_episode` for a vector env, stepping a random non-empty
    subset of its envs each step (the ``{index: action}`` form of ``step``)."""
    rng = np.random.default_rng()  # its own stream: the global numpy state stays untouched
    started = time.time()
    obs, _ = env.reset()
    step = 0
    while True:
        step += 1
        actions = list(policy(obs))
        chosen = [i for i in range(len(actions)) if rng.random() > 0.5] or [int(rng.integers(len(actions)))]
        active = {i: actions[i] for i in chosen}
        next_obs, reward, terminated, truncated, _ = env.step(active)
        _report(step, {"action": active, "next_observation": next_obs, "reward": reward}, terminated, truncated)
        obs = list(obs)  # the stepped envs' new observations come in the order of ``chosen``
        for i, new in zip(chosen, next_obs):
            obs[i] = new
        if (not ignore_done and _done(terminated, truncated)) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - started:.2f} seconds")


async def run_and_print_episode_async(
    env: Any, policy: Callable[[Any], Any], ignore_done: bool = False, max_steps: float = 1e9
) -> None:
    """:func:`run_and_print_episode` through the env's ``areset``/``astep``."""
    started = time.time()
    obs, _ = await env.areset()
    step = 0
    while True:
        step += 1
        action = policy(obs)
        next_obs, reward, terminated, truncated, _ = await env.astep(action)
        _report(step, {"observation": obs, "action": action, "reward": reward}, terminated, truncated)
        obs = next_obs
        if (not ignore_done and _done(terminated, truncated)) or step >= max_steps:
            break
    print(f"----TIME: {time.time() - started:.2f} seconds")
