"""GEM envs as Gymnasium envs (tested with gymnasium 1.4.0).

>>> from gem_integrations.gymnasium import GymnasiumEnv               # doctest: +SKIP
>>> env = GymnasiumEnv("game:GuessTheNumber-v0-easy")                 # doctest: +SKIP
>>> obs, info = env.reset(seed=0)                                     # doctest: +SKIP
>>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{5}")  # doctest: +SKIP

With ``gymnasium.make``: importing this module registers every GEM id in Gymnasium's
registry with the suite as its namespace, ``game:Wordle-v0-easy`` as
``game/Wordle-v0-easy`` (:func:`gymnasium_id`):

>>> import gymnasium, gem_integrations.gymnasium                       # doctest: +SKIP
>>> gymnasium.register_envs(gem_integrations.gymnasium)                # doctest: +SKIP
>>> env = gymnasium.make("game/Wordle-v0-easy", max_turns=8)           # doctest: +SKIP
>>> env = gymnasium.make("gem_integrations.gymnasium:game/Wordle-v0-easy")  # doctest: +SKIP

The second form imports this module itself. The GEM id as written cannot work there:
``gymnasium.make`` reads anything before a ``:`` as a module to import first, so
``gymnasium.make("game:Wordle-v0-easy")`` tries to import a module ``game``
(ModuleNotFoundError). Ids registered after this import (your own ``gem.register``) join
Gymnasium's registry when you call :func:`register_gymnasium_envs`.

Observations and actions are strings in :class:`AnyText`, a ``gymnasium.spaces.Text``
that contains every string: Gymnasium's own ``Text`` only holds strings drawn from its
charset, and GEM's boards use characters outside any fixed set (Sokoban's walls, for
one). Sampling still draws from ``Text``'s charset, so ``action_space.sample()`` gives
random text, which any GEM env accepts (as a format error).
"""

from __future__ import annotations

from typing import Any, ClassVar

from gem.host.hosted import DEFAULT_STEP_TIMEOUT, HostedEnv
from gem_integrations._support import EnvSource, import_framework

TESTED = "1.4.0"

gymnasium = import_framework("gymnasium", dist="gymnasium", extra="gymnasium", tested=TESTED)
from gymnasium import spaces  # noqa: E402  (after the guarded import above)


class AnyText(spaces.Text):
    """A text space that contains every ``str`` (any length, any character)."""

    def __init__(self, max_length: int = 64, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=0, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str)

    def __repr__(self) -> str:
        return "AnyText()"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AnyText)


class GymnasiumEnv(gymnasium.Env):
    """A ``gymnasium.Env`` over a GEM env (an id, an env, or a factory).

    ``reset(seed=s)`` seeds the GEM env, so episodes are reproducible the way
    Gymnasium's ``check_env`` expects; ``reset()`` continues the env's own stream.
    The GEM env's observations must be text (not the ``messages`` wrapper's lists).

    The env runs behind :class:`gem.host.hosted.HostedEnv` (``host``: ``"thread"``, ``"process"``
    or ``"ray"``): a ``reset`` or ``step`` that raises or overruns ``step_timeout`` seconds
    (default 300; ``None``: unbounded, in the caller's thread) ends the episode truncated with
    ``info["failure"]`` naming the cause, and the next ``reset`` plays on a fresh env.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, env: EnvSource, step_timeout: float | None = DEFAULT_STEP_TIMEOUT, host: str = "thread",
                 **make_kwargs: Any) -> None:
        self.hosted = HostedEnv(env, host=host, step_timeout=step_timeout, **make_kwargs)
        self.observation_space = AnyText()
        self.action_space = AnyText()
        self.render_mode = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        obs, info = self.hosted.reset(seed=seed, **(options or {}))
        return self._text(obs), dict(info)

    @property
    def gem_env(self) -> Any:
        """The GEM env itself (``host="thread"``; None where it lives in another process)."""
        return self.hosted.local_env

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.hosted.step(str(action))
        # GEM's single-turn envs (as the reference's) end with terminated and truncated both set;
        # in Gymnasium an episode that terminated is not also cut short, so terminated wins
        return self._text(obs), float(reward), bool(terminated), bool(truncated) and not terminated, dict(info)

    def close(self) -> None:
        self.hosted.close()

    def _text(self, obs: Any) -> str:
        if not isinstance(obs, str):
            raise TypeError(f"{self.hosted.env_id or 'the env'} gave a {type(obs).__name__} observation; "
                            "GymnasiumEnv needs text (drop the 'messages' wrapper)")
        return obs


def gymnasium_id(gem_id: str) -> str:
    """The id ``gymnasium.make`` takes for a GEM id: the suite becomes Gymnasium's namespace.

    >>> gymnasium_id("game:Wordle-v0-easy"), gymnasium_id("rg:leg_counting")
    ('game/Wordle-v0-easy', 'rg/leg_counting')
    """
    return gem_id.replace(":", "/", 1)


def register_gymnasium_envs(pattern: str | None = None) -> list[str]:
    """Register the GEM ids matching ``pattern`` (all by default) in Gymnasium's registry
    under :func:`gymnasium_id`; returns the Gymnasium ids added. Making one builds a
    :class:`GymnasiumEnv`; ``gymnasium.make``'s keyword arguments reach ``gem.make``."""
    import gem

    added = []
    for gem_id in gem.list_envs(pattern):
        gym_id = gymnasium_id(gem_id)
        if gym_id in gymnasium.registry:
            continue
        gymnasium.register(gym_id, entry_point=f"{__name__}:GymnasiumEnv", kwargs={"env": gem_id})
        added.append(gym_id)
    return added


register_gymnasium_envs()
