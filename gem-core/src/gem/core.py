"""The Env API: the text-in, text-out interface every GEM environment implements."""

from __future__ import annotations

import inspect
import random
from typing import TYPE_CHECKING, Any, ClassVar, SupportsFloat, TypeVar

import numpy as np

from gem import extend, seeding
from gem.executor import run_blocking
from gem.reward_range import UNBOUNDED, guard

if TYPE_CHECKING:
    from gem.registry import EnvSpec

StepResult = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]

#: type variables of the reference package's annotations (observations are text in GEM)
ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")
ArrayType = TypeVar("ArrayType")

#: the observation single-turn envs return after their one step (the reference's marker)
TERMINAL_STATE = "<｜TERMINAL_STATE｜>"


class EnvType(type):
    """Metaclass of :class:`Env`: constructing an env goes through :data:`gem.extend.points.env_call`, and
    ``inspect.signature(EnvClass)`` shows its ``__init__``'s parameters (through ``env_signature``)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        hook = extend.points.env_call
        if hook is None:
            return super().__call__(*args, **kwargs)
        return hook(cls, args, kwargs, super().__call__)

    @property
    def __signature__(cls) -> inspect.Signature:
        # without it, inspect would report this metaclass's (*args, **kwargs)
        signature = inspect.signature(cls.__init__)
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])  # without self
        hook = extend.points.env_signature
        return signature if hook is None else hook(cls, signature)


class Env(metaclass=EnvType):
    """Base class of GEM environments.

    Subclasses implement :meth:`reset` (calling ``super().reset(seed)`` first) and
    :meth:`step`. Randomness comes only from ``self.rng`` / ``self.np_random``, so
    ``reset(seed=s)`` determines the episode completely and ``reset()`` continues
    the env's own stream.

    Every env also takes the reference package's constructor argument ``seed=N``
    (``gem.make(id, seed=N)``): an env whose ``__init__`` does not name ``seed`` itself gets
    it from :mod:`gem.compat.ctor_seed` (through :data:`gem.extend.points.env_call`), and a
    seeded env's first ``reset()`` and the stream after it are reproducible. ``reset(seed=s)``
    still determines an episode on its own.

    Example::

        class Coin(gem.Env):
            def reset(self, seed=None, **kwargs):
                super().reset(seed)
                self.side = self.rng.choice(["heads", "tails"])
                return "Guess: heads or tails?", {}

            def step(self, action):
                won = action.strip().lower() == self.side
                return "", float(won), True, False, {"correct": won}
    """

    #: set by :func:`gem.make` to the id the env was made from
    env_id: str | None = None
    #: set by :func:`gem.make` to the spec the env was made from
    spec: EnvSpec | None = None
    #: whether subclasses' constructors get ``seed=`` added (wrappers pass it on instead)
    _takes_ctor_seed: ClassVar[bool] = True
    #: ``(low, high)``: every reward this env's ``step`` returns lies in it; a reward outside it (or not
    #: finite) is a grading failure, not a reward (:mod:`gem.reward_range`). Subclasses narrow it (a class
    #: attribute, or a property where it depends on the constructor's arguments)
    reward_range: tuple[float, float] = UNBOUNDED

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        guard(cls)  # in one place: no env can return a reward outside its declared range

    def __new__(cls, *args: Any, **kwargs: Any) -> Env:
        obj = super().__new__(cls)
        # remembered so that spawn() can build a sibling with the same arguments
        obj._init_args = (args, dict(kwargs))
        return obj

    # -- randomness -------------------------------------------------------------------
    def _seed(self, seed: int | None) -> None:
        seed = seeding.checked_seed(seeding.fresh_seed() if seed is None else seed)
        if seed < 0:
            np.random.default_rng(seed)  # numpy refuses it: raise before any state changes
        self._rng = seeding.python_rng(seed)
        # most envs never draw from numpy, and building its generator costs more than the
        # rest of a seeded reset: np_random builds it from this seed on first use, in the
        # state it would have had
        self._np_random = None
        self._np_seed = seed

    # the two properties below run on every random draw of every env: a plain attribute
    # read, with the seeding only on the AttributeError of an env never seeded
    @property
    def rng(self) -> random.Random:
        """This env's python RNG (created from OS entropy if never seeded)."""
        try:
            return self._rng
        except AttributeError:
            self._seed(None)
            return self._rng

    @property
    def np_random(self) -> np.random.Generator:
        """This env's numpy RNG (created from OS entropy if never seeded)."""
        try:
            np_rng = self._np_random
        except AttributeError:
            self._seed(None)
            np_rng = None
        if np_rng is None:
            np_rng = self._np_random = np.random.default_rng(self._np_seed)
        return np_rng

    def rng_state(self) -> dict[str, Any]:
        """JSON snapshot of both RNGs, for :meth:`get_state` implementations."""
        return seeding.rng_to_json(self.rng, self.np_random)

    def set_rng_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`rng_state` captured."""
        self._rng, self._np_random = seeding.rng_from_json(state)

    # -- the episode ------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Start an episode; returns ``(observation, info)``.

        The base implementation only reseeds: subclasses call ``super().reset(seed)``.
        """
        if seed is not None:
            self._seed(seed)
        return "", {}

    def step(self, action: str) -> StepResult:
        """Apply ``action``; returns ``(observation, reward, terminated, truncated, info)``.

        Any string is legal: a malformed action is a format error (a reward), never
        an exception.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def sample_random_action(self) -> str:
        """A random action in the env's expected format."""
        raise NotImplementedError(f"{type(self).__name__} does not implement sample_random_action()")

    def data_fingerprint(self) -> str | None:
        """A hash of the data this env poses (a dataset's records), part of its :mod:`gem.fingerprint`; an
        env that reads data from elsewhere returns one for it. ``None``: no data beyond code and arguments."""
        return None

    async def areset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Async :meth:`reset`; by default runs the sync call in a worker thread
        (the runner's own pool, see :mod:`gem.executor`)."""
        return await run_blocking(self.reset, seed, **kwargs)

    async def astep(self, action: str) -> StepResult:
        """Async :meth:`step`; by default runs the sync call in a worker thread
        (the runner's own pool, see :mod:`gem.executor`). Envs whose step waits on I/O
        can override it with a native coroutine."""
        return await run_blocking(self.step, action)

    # -- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot from which :meth:`set_state` restores the env."""
        raise NotImplementedError(f"{type(self).__name__} does not implement get_state()")

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a snapshot taken with :meth:`get_state`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement set_state()")

    def spawn(self, same_state: bool = False, **overrides: Any) -> Env:
        """A new env built with this env's arguments (``overrides`` replace some).

        With ``same_state=True`` the new env continues from this env's current state.
        """
        args, kwargs = self._init_args
        env = type(self)(*args, **{**kwargs, **overrides})
        env.env_id, env.spec = self.env_id, self.spec
        if same_state:
            env.set_state(self.get_state())
        return env

    def close(self) -> None:
        """Release resources (processes, files); the default has none."""

    @property
    def unwrapped(self) -> Env:
        """The innermost env, below every wrapper."""
        return self

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.env_id or ''}>".replace(" >", ">")


class Wrapper(Env):
    """Wraps an env and delegates to it.

    Attribute lookups that the wrapper does not answer itself go to the wrapped env
    at lookup time (nothing is copied), so the wrapped env's state is always current.
    Wrappers with state of their own override :meth:`get_wrapper_state` and
    :meth:`set_wrapper_state`.
    """

    _takes_ctor_seed = False

    def __init__(self, env: Env) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails; guard against recursion before __init__
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    @property
    def env_id(self) -> str | None:  # type: ignore[override]
        return self.env.env_id

    @property
    def spec(self) -> EnvSpec | None:  # type: ignore[override]
        return self.env.spec

    @property
    def rng(self) -> random.Random:
        return self.env.rng

    @property
    def np_random(self) -> np.random.Generator:
        return self.env.np_random

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action: str) -> StepResult:
        return self.env.step(action)

    def sample_random_action(self) -> str:
        return self.env.sample_random_action()

    async def areset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if type(self).reset is Wrapper.reset:
            return await self.env.areset(seed=seed, **kwargs)
        return await run_blocking(self.reset, seed, **kwargs)

    async def astep(self, action: str) -> StepResult:
        if type(self).step is Wrapper.step:
            return await self.env.astep(action)
        return await run_blocking(self.step, action)

    def get_wrapper_state(self) -> dict[str, Any]:
        """This wrapper's own state (JSON-serialisable); none by default."""
        return {}

    def set_wrapper_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_wrapper_state`."""

    def get_state(self) -> dict[str, Any]:
        return {"env": self.env.get_state(), "wrapper": self.get_wrapper_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state["env"])
        self.set_wrapper_state(state.get("wrapper", {}))

    def spawn(self, same_state: bool = False, **overrides: Any) -> Env:
        inner = self.env.spawn(same_state=same_state, **overrides)
        args, kwargs = self._init_args
        wrapped = type(self)(inner, *args[1:], **{k: v for k, v in kwargs.items() if k != "env"})
        if same_state:
            wrapped.set_wrapper_state(self.get_wrapper_state())
        return wrapped

    def close(self) -> None:
        self.env.close()

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"


#: the reference package's name for :class:`Wrapper`
EnvWrapper = Wrapper
