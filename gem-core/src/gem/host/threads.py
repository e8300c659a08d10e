"""The envs of an async run (:mod:`gem.runner`, :mod:`gem.multiagent.runner`), their blocking
calls in the run's own :class:`~gem.executor.ThreadPool`, under its step timeout.

A call that overruns ``step_timeout`` raises :class:`~gem.errors.StepTimeoutError`. Python
cannot stop a thread, so the call runs on in the background (a daemon thread; the pool
starts another in its place) and its env, which that thread may still be inside, is never
handed to another episode nor closed. The same holds for an episode cancelled inside a call
(its episode timeout, or another episode's error under ``on_error="raise"``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from gem.core import Env
from gem.errors import StepTimeoutError
from gem.executor import ThreadPool
from gem.host.failures import overran


class Lease:
    """The env one running episode holds, and whether a call of it is in flight (after a
    timeout or a cancellation it stays set: a thread may still be inside the env)."""

    __slots__ = ("busy", "env")

    def __init__(self) -> None:
        self.env: Any = None
        self.busy = False


class ThreadHost:
    """Runs the env calls of one run in ``pool``, each bounded by ``step_timeout`` seconds
    (``None``: unbounded), and keeps the envs between episodes (``reuse``; else each
    episode's env is closed when it ends)."""

    def __init__(self, pool: ThreadPool, step_timeout: float | None, reuse: bool = True) -> None:
        self.pool = pool
        self.step_timeout = step_timeout
        self.reuse = reuse
        self.idle: list[Any] = []  # envs between episodes, reused by the next one
        self.created: list[Any] = []
        self._stuck: set[int] = set()  # ids of envs left inside a call that never ended

    async def lease(self, lease: Lease, make_env: Callable[[], Any]) -> Any:
        """An env for an episode: one left by an earlier episode, else a new one."""
        if self.idle:
            lease.env = self.idle.pop()
        else:
            lease.busy = True  # a constructor that hangs is as stuck as a step that hangs
            try:
                lease.env = await self.pool.run(make_env)
            except Exception:  # it raised: it is over
                lease.busy = False
                raise
            lease.busy = False
            if self.reuse:
                self.created.append(lease.env)
        return lease.env

    def bind(self, lease: Lease, method: str, remote: bool = False) -> Callable[..., Awaitable[Any]]:
        """The coroutine function that calls the leased env's ``reset`` or ``step``
        (``method``): its ``a<method>``, or, where that is the base class's thread hop, the
        sync method in this run's pool directly (its future awaited: no coroutine between),
        under the step timeout. A ``remote`` env (in a worker process, which enforces the
        step timeout and runs an env's calls in order) is called as it is: it is never stuck here."""
        env = lease.env
        name = "a" + method
        if remote:
            return getattr(env, name)
        if isinstance(env, Env) and getattr(type(env), name) is getattr(Env, name):
            target: Callable[..., Awaitable[Any]] = functools.partial(self.pool.run, getattr(env, method))
        else:
            target = getattr(env, name)
        timeout = self.step_timeout

        async def call(*args: Any) -> Any:
            lease.busy = True
            try:
                result = await (target(*args) if timeout is None else asyncio.wait_for(target(*args), timeout))
            except asyncio.TimeoutError:
                if timeout is None:  # the env's own
                    lease.busy = False
                    raise
                raise StepTimeoutError(f"env {overran(method, timeout)}") from None
            except Exception:  # the env raised: its call is over
                lease.busy = False
                raise
            lease.busy = False
            return result

        return call

    def release(self, lease: Lease) -> None:
        """The episode ended: its env serves the next one (or is closed), unless a call of it
        never ended."""
        if lease.busy:
            self.pool.abandon()
            if lease.env is not None:
                self._stuck.add(id(lease.env))
        elif lease.env is not None and self.reuse:
            self.idle.append(lease.env)
        elif lease.env is not None:
            lease.env.close()

    def close(self) -> None:
        """Close the pool and every env this run kept, except those stuck in a call."""
        self.pool.close()
        for env in self.created:
            if id(env) not in self._stuck:
                env.close()
