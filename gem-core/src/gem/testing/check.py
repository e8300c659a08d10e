"""``check_env``: the conformance check every registered env must pass."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Iterable
from typing import Any

import numpy as np

from gem.core import Env

ADVERSARIAL_ACTIONS: tuple[str, ...] = (
    "",
    " ",
    "\n\n\n",
    "\t\r\x0b\x0c",
    "\x00",
    "\x00" * 64,
    "\x1b[2J\x1b[31mred",
    "a" * 1_000_000,
    "9" * 5000,
    "-1",
    "1e309",
    "nan",
    "NaN inf -inf",
    "💥" * 1000,
    "\u202eevil\u202c",
    "\ud800",
    "é́́́́",
    "\\boxed{",
    "\\boxed{}",
    "\\boxed{ }",
    "\\boxed{\\boxed{\\boxed{1}}}",
    "\\boxed{" * 2000 + "}" * 2000,
    "{" * 10000,
    "}" * 10000,
    "[" * 5000,
    "\\boxed{-99999999999999999999999999}",
    "\\boxed{0}",
    "\\boxed{1}",
    "\\boxed{a}",
    "\\boxed{A1}",
    "\\boxed{up}",
    "\\boxed{1 2 3}",
    "\\boxed{(1, 2)}",
    "\\boxed{[1, 2]}",
    "<answer></answer>",
    "<answer>" * 100,
    "<python>import os; os.system('echo hi')</python>",
    "```python\nwhile True: pass\n```",
    "<tool_call>{not json}</tool_call>",
    "<search>",
    "%s%s%s%n",
    "'; DROP TABLE envs; --",
    "${jndi:ldap://x}",
    "../../../../etc/passwd",
)


class CheckEnvError(AssertionError):
    """An env failed one of ``check_env``'s checks; the message names the check."""


def _random_strings(rng: random.Random, n: int) -> Iterable[str]:
    alphabets = [
        "abcdefghijklmnopqrstuvwxyz",
        "0123456789 -+.,",
        "{}[]()\\<>/|'\"`",
        "".join(chr(c) for c in range(32, 127)),
    ]
    for _ in range(n):
        kind = rng.random()
        length = rng.choice([1, 2, 5, 20, 200])
        if kind < 0.5:
            text = "".join(rng.choice(rng.choice(alphabets)) for _ in range(length))
        else:
            text = "".join(chr(rng.randrange(1, 0x2FFFF)) for _ in range(length))
        yield f"\\boxed{{{text}}}" if rng.random() < 0.5 else text


def _fail(check: str, env: Any, detail: str) -> CheckEnvError:
    return CheckEnvError(f"check_env[{check}] failed for {env!r}: {detail}")


def _check_reset(env: Env, out: Any, check: str) -> Any:
    if not (isinstance(out, tuple) and len(out) == 2):
        raise _fail(check, env, f"reset() must return (observation, info), got {type(out).__name__}")
    obs, info = out
    if not isinstance(obs, (str, list)):
        raise _fail(check, env, f"observation must be str (or a message list), got {type(obs).__name__}")
    if not isinstance(info, dict):
        raise _fail(check, env, f"info must be a dict, got {type(info).__name__}")
    return obs


def _check_step(env: Env, out: Any, action: str, check: str) -> tuple[Any, float, bool]:
    shown = repr(action[:60]) + ("..." if len(action) > 60 else "")
    if not (isinstance(out, tuple) and len(out) == 5):
        raise _fail(check, env, f"step({shown}) must return a 5-tuple, got {out!r:.200}")
    obs, reward, terminated, truncated, info = out
    if not isinstance(obs, (str, list)):
        raise _fail(check, env, f"step({shown}): observation is {type(obs).__name__}, not str")
    try:
        value = float(reward)
    except (TypeError, ValueError):
        raise _fail(check, env, f"step({shown}): reward {reward!r} is not a number") from None
    if not math.isfinite(value):
        raise _fail(check, env, f"step({shown}): reward {reward!r} is not finite")
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, (bool, np.bool_)):
            raise _fail(check, env, f"step({shown}): {name} is {type(flag).__name__}, not bool")
    if not isinstance(info, dict):
        raise _fail(check, env, f"step({shown}): info is {type(info).__name__}, not dict")
    return obs, value, bool(terminated or truncated)


def _step(env: Env, action: str, check: str) -> tuple[Any, float, bool]:
    try:
        out = env.step(action)
    except Exception as exc:
        shown = repr(action[:60]) + ("..." if len(action) > 60 else "")
        raise _fail(check, env, f"step({shown}) raised {type(exc).__name__}: {exc}") from exc
    return _check_step(env, out, action, check)


def _rollout(env: Env, seed: int, steps: int) -> list[tuple[Any, ...]]:
    """Reset with ``seed`` and play the env's own random actions."""
    trace: list[tuple[Any, ...]] = [("reset", _check_reset(env, env.reset(seed=seed), "determinism"))]
    for _ in range(steps):
        action = env.sample_random_action()
        obs, reward, done = _step(env, action, "determinism")
        trace.append((action, obs, reward, done))
        if done:
            break
    return trace


def check_env(
    env: Env,
    *,
    seed: int = 0,
    num_random_strings: int = 200,
    max_episode_steps: int = 1000,
    skip: Iterable[str] = (),
) -> None:
    """Check that ``env`` follows the GEM Env contract; raises :class:`CheckEnvError`.

    Checks (names usable in ``skip``): ``api`` (types of reset/step, episodes end within
    ``max_episode_steps`` under random actions), ``robustness`` (adversarial and
    ``num_random_strings`` random strings never raise), ``determinism`` (``reset(seed)``
    replays the same episode), ``state`` (``get_state`` is JSON and ``set_state``
    resumes exactly), ``spawn``, ``async`` (``areset``/``astep``) and ``global_rng``
    (the global ``random``/``numpy`` state is untouched).
    """
    skip = set(skip)
    py_state, np_state = random.getstate(), np.random.get_state()

    if "api" not in skip:
        _check_reset(env, env.reset(seed=seed), "api")
        for _episode in range(2):
            for step in range(max_episode_steps + 1):
                if step == max_episode_steps:
                    raise _fail("api", env, f"episode did not end within {max_episode_steps} random actions")
                action = env.sample_random_action()
                if not isinstance(action, str):
                    raise _fail("api", env, f"sample_random_action() returned {type(action).__name__}")
                if _step(env, action, "api")[2]:
                    break
            _check_reset(env, env.reset(), "api")

    if "robustness" not in skip:
        rng = random.Random(seed)
        env.reset(seed=seed)
        for action in [*ADVERSARIAL_ACTIONS, *_random_strings(rng, num_random_strings)]:
            if _step(env, action, "robustness")[2]:
                _check_reset(env, env.reset(), "robustness")

    if "determinism" not in skip:
        first = _rollout(env, seed + 1, max_episode_steps)
        second = _rollout(env, seed + 1, max_episode_steps)
        if first != second:
            diff = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)
            raise _fail("determinism", env, f"reset(seed={seed + 1}) replayed differently at step {diff}: "
                        f"{first[diff]!r:.300} vs {second[diff]!r:.300}")

    if "state" not in skip:
        _check_state(env, seed + 2, "spawn" not in skip)

    if "spawn" not in skip:
        twin = env.spawn()
        if twin is env:
            raise _fail("spawn", env, "spawn() returned the same object")
        if _rollout(twin, seed + 3, 5) != _rollout(env, seed + 3, 5):
            raise _fail("spawn", env, "a spawned env replays a seeded episode differently")
        twin.close()

    if "async" not in skip:
        async def play() -> None:
            _check_reset(env, await env.areset(seed=seed), "async")
            _check_step(env, await env.astep(env.sample_random_action()), "<random>", "async")

        asyncio.run(play())

    if "global_rng" not in skip:
        if random.getstate() != py_state:
            raise _fail("global_rng", env, "the global `random` state changed: use self.rng")
        new_np = np.random.get_state()
        if new_np[0] != np_state[0] or not np.array_equal(new_np[1], np_state[1]) or new_np[2:] != np_state[2:]:
            raise _fail("global_rng", env, "the global numpy RNG state changed: use self.np_random")


def _check_state(env: Env, seed: int, with_spawn: bool) -> None:
    env.reset(seed=seed)
    done = False
    for _ in range(2):  # move into the episode a little, so the state is not just a reset
        if done:
            break
        done = _step(env, env.sample_random_action(), "state")[2]
    if done:
        env.reset(seed=seed)
    try:
        state = env.get_state()
    except NotImplementedError as exc:
        raise _fail("state", env, f"get_state() is not implemented ({exc})") from None
    try:
        text = json.dumps(state)
    except (TypeError, ValueError) as exc:
        raise _fail("state", env, f"get_state() is not JSON-serialisable: {exc}") from None

    def continue_(target: Env) -> list[tuple[Any, ...]]:
        trace = []
        for _ in range(5):
            action = target.sample_random_action()
            obs, reward, done = _step(target, action, "state")
            trace.append((action, obs, reward, done))
            if done:
                break
        return trace

    expected = continue_(env)
    env.set_state(json.loads(text))
    again = continue_(env)
    if again != expected:
        raise _fail("state", env, f"after set_state(get_state()) the env continued differently: "
                    f"{expected!r:.300} vs {again!r:.300}")
    if with_spawn:
        env.set_state(json.loads(text))
        twin = env.spawn(same_state=True)
        if continue_(twin) != expected:
            raise _fail("spawn", env, "spawn(same_state=True) did not continue the episode exactly")
        twin.close()
