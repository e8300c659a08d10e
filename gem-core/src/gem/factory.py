"""The one env factory: a picklable recipe for a fresh env, used wherever envs are made
away from the caller (the runner's worker processes, the host's Ray actors, the trainer's
workers, the framework adapters).

A plain object, not a closure, so it crosses to a worker process; each call builds a new
env: ``gem.make(id, **kwargs)`` (registering ``entry_point`` first where the id is unknown,
as in a fresh worker), a copy of an env (:meth:`gem.Env.spawn`) or a factory's product,
then the ``wrappers`` (names, as :func:`gem.wrappers.apply_wrappers` takes them).

>>> make_env = EnvFactory("game:GuessTheNumber-v0-easy", wrappers="concat_with_action")
>>> make_env.env_id, make_env.wrapped(None, None).wrappers
('game:GuessTheNumber-v0-easy', None)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gem.core import Env
from gem.registration import list_envs, make, register
from gem.wrappers import apply_wrappers

EnvSource = str | Env | Callable[[], Env]


@dataclass
class EnvFactory:
    """Makes one env from ``env`` (an id, an env to copy, or a zero-argument factory), then applies ``wrappers``."""

    env: EnvSource
    kwargs: dict[str, Any] = field(default_factory=dict)
    wrappers: Any = None
    tokenizer: Any = None
    #: ``"module:Class"`` the id is registered with where it is not registered yet (a fresh worker)
    entry_point: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.env, (str, Env)) and not callable(self.env):
            raise TypeError(f"env must be an id, an Env or a factory, got {type(self.env).__name__}")
        if self.kwargs and not isinstance(self.env, str):
            raise TypeError(f"keyword arguments ({', '.join(self.kwargs)}) are for an env id, "
                            f"not a {type(self.env).__name__}")

    @property
    def env_id(self) -> str | None:
        """The id this factory makes, where it makes one by id."""
        return self.env if isinstance(self.env, str) else None

    def __call__(self) -> Env:
        if isinstance(self.env, str):
            if self.entry_point and self.env not in list_envs():
                register(self.env, self.entry_point)
            env = make(self.env, **self.kwargs)
        elif isinstance(self.env, Env):
            env = self.env.spawn()
        else:
            env = self.env()
        if not self.wrappers:
            return env
        return apply_wrappers(env, self.wrappers, tokenizer=self.tokenizer)

    def wrapped(self, wrappers: Any, tokenizer: Any = None) -> EnvFactory:
        """The same env with ``wrappers`` applied (given ``tokenizer`` when one needs it)."""
        return replace(self, wrappers=wrappers, tokenizer=tokenizer)


__all__ = ["EnvFactory", "EnvSource"]
