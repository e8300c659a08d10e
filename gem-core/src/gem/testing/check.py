"""``check_env``: the conformance check every registered env must pass."""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gem.conventions import FORMAT_ERROR
from gem.core import Env
from gem.reward_range import REWARD_ERROR, UNBOUNDED

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
    """An env failed ``check_env``; the message is the whole report, one line per check,
    each failure naming its check as ``check_env[name]``."""

    def __init__(self, message: str, report: CheckReport | None = None, check: str = "", detail: str = "") -> None:
        super().__init__(message)
        #: the whole report (on the error check_env raises at the end)
        self.report = report
        #: the failing check and what it found (on the error of one check)
        self.check, self.detail = check, detail


class _Skipped(Exception):
    """An optional capability is missing: the check is skipped, with this note."""


#: checks of optional capabilities: missing ones are skipped with a note unless strict
OPTIONAL = ("state", "spawn")
CHECKS = ("api", "robustness", "determinism", "state", "spawn", "async", "global_rng")


@dataclass
class CheckResult:
    """One check's outcome: ``"passed"``, ``"failed"`` or ``"skipped"``, and why."""

    name: str
    status: str
    detail: str = ""


@dataclass
class CheckReport:
    """What :func:`check_env` found, check by check; ``str(report)`` is readable."""

    env: str
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        counts = {s: sum(r.status == s for r in self.results) for s in ("failed", "passed", "skipped")}
        lines = [f"check_env report for {self.env}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n)]
        for r in self.results:
            if r.status == "failed":
                lines.append(f"  FAIL  check_env[{r.name}] failed for {self.env}: {r.detail}")
            elif r.status == "skipped":
                lines.append(f"  skip  {r.name}: {r.detail}")
            else:
                lines.append(f"  ok    {r.name}")
        lines += [f"  note  {n}" for n in self.notes]
        return "\n".join(lines)


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


class _Actions:
    """The env's random actions, or (when it has none) short strings from a seeded RNG of
    check_env's own, so the other checks can still play episodes."""

    def __init__(self, env: Env, own: bool) -> None:
        self.env, self.own = env, own
        self.rng = random.Random(0)

    def reseed(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, env: Env | None = None) -> str:
        if self.own:
            return next(iter(_random_strings(self.rng, 1)))
        return (env or self.env).sample_random_action()


def _fail(check: str, env: Any, detail: str) -> CheckEnvError:
    return CheckEnvError(f"check_env[{check}] failed for {env!r}: {detail}", check=check, detail=detail)


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
    if REWARD_ERROR in info:  # the env returned a reward outside its declared range (gem.reward_range)
        raise _fail(check, env, f"step({shown}): {info[REWARD_ERROR]}")
    flag = info.get(FORMAT_ERROR, False)
    if not isinstance(flag, (bool, np.bool_)):
        raise _fail(check, env, f"step({shown}): info[{FORMAT_ERROR!r}] is {type(flag).__name__}, not bool")
    if flag and not terminated:
        raise _fail(check, env, f"step({shown}): a format error must end the episode (terminated=True)")
    return obs, value, bool(terminated or truncated)


def _step(env: Env, action: str, check: str) -> tuple[Any, float, bool]:
    try:
        out = env.step(action)
    except Exception as exc:
        shown = repr(action[:60]) + ("..." if len(action) > 60 else "")
        raise _fail(check, env, f"step({shown}) raised {type(exc).__name__}: {exc}") from exc
    return _check_step(env, out, action, check)


def _rollout(env: Env, actions: _Actions, seed: int, steps: int, check: str) -> list[tuple[Any, ...]]:
    """Reset with ``seed`` and play random actions (seeded by ``seed`` when they are ours)."""
    trace: list[tuple[Any, ...]] = [("reset", _check_reset(env, env.reset(seed=seed), check))]
    actions.reseed(seed)
    for _ in range(steps):
        action = actions(env)
        obs, reward, done = _step(env, action, check)
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
    strict: bool = False,
) -> CheckReport:
    """Check that ``env`` follows the GEM Env contract; returns a :class:`CheckReport`
    and raises :class:`CheckEnvError` (whose message is the report) if a check fails.

    Checks (names usable in ``skip``): ``api`` (types of reset/step, episodes end within
    ``max_episode_steps`` under random actions; an ``info["format_error"]`` is a bool and a
    format error ends the episode, see :mod:`gem.conventions`; ``reward_range`` is a non-empty
    ``(low, high)`` and no reward leaves it, see :mod:`gem.reward_range`), ``robustness`` (adversarial and
    ``num_random_strings`` random strings never raise), ``determinism`` (``reset(seed)``
    replays the same episode), ``state`` (``get_state`` is JSON and ``set_state``
    resumes exactly), ``spawn``, ``async`` (``areset``/``astep``) and ``global_rng``
    (the global ``random``/``numpy`` state is untouched).

    ``get_state``/``set_state``, ``spawn`` and ``sample_random_action`` are optional
    capabilities: an env that does not implement them (``NotImplementedError``) has
    those checks skipped with a note (random actions then come from check_env's own
    strings), unless ``strict=True`` makes them required.

    >>> print(check_env(gem.make("game:GuessTheNumber-v0-easy")))  # doctest: +SKIP
    check_env report for <GuessTheNumberEnv game:GuessTheNumber-v0-easy>: 7 passed
    """
    skip = set(skip)
    unknown = skip - set(CHECKS)
    if unknown:
        raise ValueError(f"unknown checks in skip: {sorted(unknown)}; the checks are {', '.join(CHECKS)}")
    report = CheckReport(repr(env))
    py_state, np_state = random.getstate(), np.random.get_state()
    actions = _Actions(env, own=False)
    #: results known before a check runs
    decided: dict[str, CheckResult] = {}
    try:
        env.reset(seed=seed)
        actions()
    except NotImplementedError as exc:
        if strict:
            decided["api"] = CheckResult("api", "failed", f"sample_random_action() is not implemented ({exc})")
        else:
            report.notes.append("sample_random_action() is not implemented (optional): the checks played "
                                "check_env's own random strings instead; strict=True requires it")
        actions = _Actions(env, own=True)
    except Exception:
        pass  # the api check below reports what fails, with its context

    for name in CHECKS:
        if name in skip:
            decided[name] = CheckResult(name, "skipped", "asked for (skip=)")
        if name in decided:
            report.results.append(decided[name])
            continue
        try:
            if name == "global_rng":
                _check_global_rng(env, py_state, np_state)
            else:
                _RUN[name](env, actions, seed, num_random_strings, max_episode_steps, "spawn" not in skip)
        except _Skipped as note:
            if strict:
                report.results.append(CheckResult(name, "failed", f"{note} (strict=True requires it)"))
            else:
                report.results.append(CheckResult(name, "skipped", f"{note} (optional; strict=True requires it)"))
        except CheckEnvError as exc:
            report.results.append(CheckResult(exc.check or name, "failed", exc.detail or str(exc)))
        except Exception as exc:
            report.results.append(CheckResult(name, "failed", f"raised {type(exc).__name__}: {exc}"))
        else:
            report.results.append(CheckResult(name, "passed"))
    if report.failed:
        raise CheckEnvError(str(report), report)
    return report


def _check_reward_range(env: Env) -> None:
    declared = getattr(env, "reward_range", UNBOUNDED)
    try:
        low, high = (float(end) for end in declared)
    except (TypeError, ValueError):
        raise _fail("api", env, f"reward_range must be (low, high), got {declared!r}") from None
    if not low <= high:
        raise _fail("api", env, f"reward_range {declared!r} is empty (low > high)")


def _check_api(env: Env, actions: _Actions, seed: int, _n: int, max_steps: int, _spawn: bool) -> None:
    _check_reward_range(env)
    _check_reset(env, env.reset(seed=seed), "api")
    actions.reseed(seed)
    for _episode in range(2):
        for step in range(max_steps + 1):
            if step == max_steps:
                raise _fail("api", env, f"episode did not end within {max_steps} random actions")
            action = actions()
            if not isinstance(action, str):
                raise _fail("api", env, f"sample_random_action() returned {type(action).__name__}")
            if _step(env, action, "api")[2]:
                break
        _check_reset(env, env.reset(), "api")


def _check_robustness(env: Env, _actions: _Actions, seed: int, n: int, _max: int, _spawn: bool) -> None:
    rng = random.Random(seed)
    env.reset(seed=seed)
    for action in [*ADVERSARIAL_ACTIONS, *_random_strings(rng, n)]:
        if _step(env, action, "robustness")[2]:
            _check_reset(env, env.reset(), "robustness")


def _check_determinism(env: Env, actions: _Actions, seed: int, _n: int, max_steps: int, _spawn: bool) -> None:
    first = _rollout(env, actions, seed + 1, max_steps, "determinism")
    second = _rollout(env, actions, seed + 1, max_steps, "determinism")
    if first != second:
        diff = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)
        raise _fail("determinism", env, f"reset(seed={seed + 1}) replayed differently at step {diff}: "
                    f"{first[diff]!r:.300} vs {second[diff]!r:.300}")


def _check_spawn(env: Env, actions: _Actions, seed: int, _n: int, _max: int, _spawn: bool) -> None:
    try:
        twin = env.spawn()
    except NotImplementedError as exc:
        raise _Skipped(f"spawn() is not implemented ({exc})") from None
    if twin is env:
        raise _fail("spawn", env, "spawn() returned the same object")
    if _rollout(twin, actions, seed + 3, 5, "spawn") != _rollout(env, actions, seed + 3, 5, "spawn"):
        raise _fail("spawn", env, "a spawned env replays a seeded episode differently")
    twin.close()


def _check_async(env: Env, actions: _Actions, seed: int, _n: int, _max: int, _spawn: bool) -> None:
    async def play() -> None:
        _check_reset(env, await env.areset(seed=seed), "async")
        _check_step(env, await env.astep(actions()), "<random>", "async")

    asyncio.run(play())


def _check_global_rng(env: Env, py_state: Any, np_state: Any) -> None:
    if random.getstate() != py_state:
        raise _fail("global_rng", env, "the global `random` state changed: use self.rng")
    new_np = np.random.get_state()
    if new_np[0] != np_state[0] or not np.array_equal(new_np[1], np_state[1]) or new_np[2:] != np_state[2:]:
        raise _fail("global_rng", env, "the global numpy RNG state changed: use self.np_random")


def _check_state(env: Env, actions: _Actions, seed: int, _n: int, _max: int, with_spawn: bool) -> None:
    seed += 2
    env.reset(seed=seed)
    actions.reseed(seed)
    done = False
    for _ in range(2):  # move into the episode a little, so the state is not just a reset
        if done:
            break
        done = _step(env, actions(), "state")[2]
    if done:
        env.reset(seed=seed)
    try:
        state = env.get_state()
    except NotImplementedError as exc:
        raise _Skipped(f"get_state() is not implemented ({exc})") from None
    try:
        text = json.dumps(state)
    except (TypeError, ValueError) as exc:
        raise _fail("state", env, f"get_state() is not JSON-serialisable: {exc}") from None

    def continue_(target: Env) -> list[tuple[Any, ...]]:
        actions.reseed(seed + 1)
        trace = []
        for _ in range(5):
            action = actions(target)
            obs, reward, done = _step(target, action, "state")
            trace.append((action, obs, reward, done))
            if done:
                break
        return trace

    expected = continue_(env)
    try:
        env.set_state(json.loads(text))
    except NotImplementedError as exc:
        raise _Skipped(f"set_state() is not implemented ({exc})") from None
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


_RUN = {
    "api": _check_api,
    "robustness": _check_robustness,
    "determinism": _check_determinism,
    "state": _check_state,
    "spawn": _check_spawn,
    "async": _check_async,
}
