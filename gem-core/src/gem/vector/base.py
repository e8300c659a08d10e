"""The one VectorEnv contract that every backend implements."""

from __future__ import annotations

import asyncio
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from gem import extend
from gem.core import Env
from gem.errors import VectorEnvError
from gem.host.calls import Call
from gem.host.failures import Failure
from gem.host.recovery import Recovery
from gem.vector.slot import ON_ERROR, AutoresetMode


class VectorEnv(ABC):
    """``num_envs`` envs stepped together.

    ``step`` takes a list of actions (one per env) or a dict ``{index: action}`` that
    steps only those envs; with a dict, the results are in the dict's order (as in the
    reference package): ``obs[k]`` belongs to the ``k``-th key. Rewards, terminations and
    truncations are numpy arrays, observations and infos lists.
    """

    backend: str = "?"
    #: what messages call the backend's workers (backends whose envs live elsewhere), and for short
    worker_names: tuple[str, str] = ("worker process", "worker")

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        env_ids: Sequence[str | None] | None = None,
        seed: int | Sequence[int | None] | None = 0,
        autoreset_mode: str | AutoresetMode = "same_step",
        on_error: str = "raise",
        step_timeout: float | None = None,
    ) -> None:
        if not env_fns:
            raise ValueError("a vector env needs at least one env")
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        try:
            self.autoreset_mode = AutoresetMode(getattr(autoreset_mode, "value", autoreset_mode))
        except ValueError:
            modes = ", ".join(m.value for m in AutoresetMode)
            raise ValueError(f"autoreset_mode must be one of {modes}, got {autoreset_mode!r}") from None
        self.num_envs = len(env_fns)
        self.env_ids = list(env_ids) if env_ids is not None else [None] * self.num_envs
        if step_timeout is not None and step_timeout <= 0:
            raise ValueError(f"step_timeout must be > 0 seconds, got {step_timeout}")
        self.on_error = on_error
        #: seconds one env's reset/step/call may take; an env that overruns is replaced
        self.step_timeout = step_timeout
        self._base_seed = seed
        self._closed = False
        #: step timeouts, restarts and lost episodes (:mod:`gem.host`)
        me = weakref.ref(self)  # not a bound method: a cycle would keep a dropped vector env's workers alive
        self.recovery = Recovery(self.env_ids, on_error, step_timeout, lambda calls: me()._execute(calls),
                                 *self.worker_names)

    # -- what a backend implements ------------------------------------------------------
    @abstractmethod
    def _execute(self, calls: Sequence[Call]) -> list[Any]:
        """Run the calls (at most one per env), returning a value or a Failure for each."""

    # -- the API ------------------------------------------------------------------------
    def reset(
        self,
        seed: int | Sequence[int | None] | None = None,
        indices: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset envs (all, or ``indices``); env ``i`` gets ``seed + i`` for an int seed.

        ``kwargs`` go to every env's ``reset``, except those :data:`gem.extend.points.vector_reset_kwargs`
        takes out for one env: the reference's ``env{i}_kwargs={...}`` (:func:`gem.compat.shims.per_env_kwargs`)
        go to env ``i`` only: ``reset(env0_kwargs={"idx": 3})``.
        """
        indices = list(range(self.num_envs)) if indices is None else list(indices)
        per_env = extend.points.vector_reset_kwargs
        own = per_env(kwargs, self.num_envs) if per_env is not None else {}
        if seed is None and self._base_seed is not None:
            # the first reset uses make_vec's seed: seed + i, or one seed (or None) per env
            first, self._base_seed = self._base_seed, None
            seeds: list[int | None] = (
                [first + i for i in indices] if isinstance(first, (int, np.integer)) else [first[i] for i in indices]
            )
        elif seed is None:
            seeds = [None] * len(indices)
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in indices]
        else:
            seeds = list(seed)
            if len(seeds) != len(indices):
                raise ValueError(f"got {len(seeds)} seeds for {len(indices)} envs")
        # a seed in env{i}_kwargs is that env's reset seed
        seeds = [own[i].pop("seed") if "seed" in own.get(i, {}) else s for i, s in zip(indices, seeds)]
        results = self._run([(i, "reset", (s, {**kwargs, **own.get(i, {})}), {}) for i, s in zip(indices, seeds)])
        return [r[0] for r in results], [r[1] for r in results]

    def step(
        self, actions: Sequence[Any] | Mapping[int, Any]
    ) -> tuple[Any, Any, Any, Any, Any]:
        """Step envs; see the class docstring for list versus dict actions."""
        if isinstance(actions, Mapping):
            indices = [int(i) for i in actions]
            bad = [i for i in indices if not 0 <= i < self.num_envs]
            if bad:
                raise IndexError(f"env indices {bad} out of range for {self.num_envs} envs")
            results = self._run([(i, "step", (actions[i],), {}) for i in indices])
        else:
            actions = list(actions)
            if len(actions) != self.num_envs:
                raise ValueError(f"got {len(actions)} actions for {self.num_envs} envs")
            results = self._run([(i, "step", (a,), {}) for i, a in enumerate(actions)])
        if not results:
            return [], np.zeros(0), np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.bool_), []
        obs, rew, term, trunc, infos = zip(*results)
        return (
            list(obs),
            np.asarray(rew, dtype=np.float64),
            np.asarray(term, dtype=np.bool_),
            np.asarray(trunc, dtype=np.bool_),
            list(infos),
        )

    async def areset(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[dict[str, Any]]]:
        return await asyncio.to_thread(self.reset, *args, **kwargs)

    async def astep(self, actions: Sequence[Any] | Mapping[int, Any]) -> tuple[Any, Any, Any, Any, Any]:
        return await asyncio.to_thread(self.step, actions)

    def call(self, name: str, *args: Any, indices: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """Call method ``name`` (or read attribute ``name``) on each env."""
        indices = list(range(self.num_envs)) if indices is None else list(indices)
        return self._run([(i, "call", (name, args, kwargs), {}) for i in indices])

    def sample_random_action(self) -> list[str]:
        """One random action per env."""
        return self.call("sample_random_action")

    def get_state(self) -> list[dict[str, Any]]:
        return self.call("get_state")

    def set_state(self, states: Sequence[dict[str, Any]]) -> None:
        for i, state in enumerate(states):
            self._run([(i, "call", ("set_state", (state,), {}), {})])

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    def _close(self) -> None:
        pass

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return self.num_envs

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.num_envs} envs, backend={self.backend}>"

    def _run(self, calls: Sequence[Call]) -> list[Any]:
        if self._closed:
            raise RuntimeError("this vector env is closed")
        results = self._execute(calls)
        failures = {c[0]: r for c, r in zip(calls, results) if isinstance(r, Failure)}
        if failures:
            first = next(iter(failures.values()))
            others = "".join(f"\n{f.describe()}" for f in list(failures.values())[1:])
            raise VectorEnvError(
                f"{first.describe()}{others}\n--- traceback of env {first.index} ---\n{first.traceback}",
                first.index,
                first.env_id,
                results={c[0]: r for c, r in zip(calls, results) if not isinstance(r, Failure)},
                failures=failures,
            )
        return results
