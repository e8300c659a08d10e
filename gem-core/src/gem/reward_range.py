"""Every env's reward stays in the range the env declares, enforced once, here.

A reward is what an RL policy optimises, so a grader that can be made to return 1e6 (a
scorer the answer rebinds, a judge that prints its own verdict) must not pass that on. Each
:class:`gem.Env` declares ``reward_range`` (``(low, high)``, unbounded by default; the graded
single-turn families declare ``(min(0, format_error_reward), 1)`` through
:func:`graded_range`), and :class:`gem.Env` wraps every subclass's ``step`` and ``astep``
with :func:`checked` when the class is defined, so no suite can forget it.

A reward outside the range, or one that is not a finite number, is a grading failure, not a
reward: the step's reward becomes :func:`failure_reward` (0 where the range holds it, else
its nearest end) and ``info["reward_error"]`` says what the env returned. Rewards that are
not scalars (a multi-agent env's dict of rewards) pass unchanged.

>>> import gem
>>> class Broken(gem.Env):
...     reward_range = (0.0, 1.0)
...     def step(self, action):
...         return "", 1e6, True, False, {}
>>> Broken().step("x")[1:]
(0.0, True, False, {'reward_error': 'the env returned reward 1000000.0, outside its declared reward_range [0.0, 1.0]'})
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from typing import Any

#: the ``info`` key that records a reward the env returned outside its declared range
REWARD_ERROR = "reward_error"
#: the default range: any finite reward
UNBOUNDED = (-math.inf, math.inf)
_PLAIN = (float, int)


def graded_range(format_error_reward: float) -> tuple[float, float]:
    """The range of an env graded 0 (wrong) to 1 (right) whose unreadable answer scores
    ``format_error_reward``."""
    return min(0.0, float(format_error_reward)), max(1.0, float(format_error_reward))


def failure_reward(reward_range: tuple[float, float]) -> float:
    """The reward of a step whose grade failed: 0 where the range holds it, else its nearest end."""
    low, high = reward_range
    return float(min(max(0.0, low), high))


def checked(env: Any, result: Any) -> Any:
    """``result`` of ``env.step``, its reward replaced by :func:`failure_reward` when it is
    not a finite number inside ``env.reward_range``."""
    if type(result) is not tuple or len(result) != 5:
        return result  # not a single-agent step result: check_env reports the shape
    reward = result[1]
    kind = type(reward)
    if kind not in _PLAIN and (kind is bool or not isinstance(reward, numbers.Real)):
        return result  # a dict or an array of rewards (multi-agent, vector): each agent's own env checks
    low, high = getattr(env, "reward_range", UNBOUNDED)
    if low <= reward <= high:  # False for NaN
        return result
    info = result[4] if isinstance(result[4], dict) else {}
    info = {**info, REWARD_ERROR: f"the env returned reward {float(reward)!r}, outside its declared "
                                  f"reward_range [{low}, {high}]"}  # fmt: skip
    return result[0], failure_reward((low, high)), result[2], result[3], info


def guard(cls: type) -> None:
    """Wrap ``step``/``astep`` defined in ``cls``'s own body with :func:`checked` (once)."""
    step = cls.__dict__.get("step")
    if callable(step) and not getattr(step, "_gem_reward_checked", False):

        @functools.wraps(step)
        def guarded_step(self: Any, action: Any, *args: Any, **kwargs: Any) -> Any:
            return checked(self, step(self, action, *args, **kwargs))

        guarded_step._gem_reward_checked = True  # type: ignore[attr-defined]
        cls.step = guarded_step  # type: ignore[attr-defined]
    astep = cls.__dict__.get("astep")
    if inspect.iscoroutinefunction(astep) and not getattr(astep, "_gem_reward_checked", False):

        @functools.wraps(astep)
        async def guarded_astep(self: Any, action: Any, *args: Any, **kwargs: Any) -> Any:
            return checked(self, await astep(self, action, *args, **kwargs))

        guarded_astep._gem_reward_checked = True  # type: ignore[attr-defined]
        cls.astep = guarded_astep  # type: ignore[attr-defined]


#: ``reward_range = graded`` in a class body: the range of :func:`graded_range` for the env's own
#: ``format_error_reward`` (the single-turn math, reasoning-gym, code and QA families)
graded = property(lambda env: graded_range(getattr(env, "format_error_reward", 0.0)),
                  doc="(min(0, format_error_reward), 1): graded 0 to 1, an unreadable answer its format-error reward")
