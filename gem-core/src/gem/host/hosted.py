"""One env behind the host, for code that plays episodes one env at a time: the framework
adapters (:mod:`gem_integrations`), ``gem serve``, anyone's own loop.

A :class:`HostedEnv` runs its env in this process, in threads the host keeps for the
process's life (``host="thread"``, the default), in a worker process (``"process"``) or in
a Ray actor (``"ray"``, across a cluster), through the
vector backends (:mod:`gem.vector`, one env each), so the deadlines, restarts and failure
names are the host's own. Its calls never raise for the env's sake: a ``step`` that raises,
overruns ``step_timeout`` or loses its worker ends the episode instead, truncated, with the
env's failure reward (:func:`gem.reward_range.failure_reward`: 0 where the env's range holds
it) and ``info["failure"] = {"type": ..., "message": ...}`` (``type`` is the exception's name,
or ``StepTimeout`` / ``WorkerDied`` / ``EpisodeLost``, :mod:`gem.host.failures`). A ``reset``
that fails the same way returns an empty observation and the failure, and the handle is
:attr:`~HostedEnv.done`. The hung env was replaced by a fresh one (a thread cannot be killed:
it runs on in the background; a worker or actor is killed), so the next ``reset`` starts a
new episode on the same handle.

>>> with HostedEnv("game:GuessTheNumber-v0-easy", step_timeout=30) as env:  # doctest: +SKIP
...     obs, info = env.reset(seed=3)
...     obs, reward, terminated, truncated, info = env.step(r"\\boxed{5}")
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gem.core import Env
from gem.errors import VectorEnvError
from gem.executor import ThreadPool
from gem.factory import EnvFactory
from gem.host.failures import Failure, timed_out
from gem.reward_range import UNBOUNDED, failure_reward
from gem.vector import make_vector_env
from gem.vector.slot import AutoresetMode

#: seconds one reset or step may take by default before its episode ends (an LLM-graded or
#: sandboxed step can take a minute; a hang should not stall a training batch for longer)
DEFAULT_STEP_TIMEOUT = 300.0
#: where a hosted env can live -> the vector backend that puts it there
HOSTS = {"thread": "sync", "process": "process", "ray": "ray"}
#: the ``info`` key of a reset or step that failed
FAILURE = "failure"

EnvSource = str | Env | Callable[[], Env]


class HostedEnv:
    """One env in a thread, a worker process or a Ray actor, each call bounded by
    ``step_timeout`` seconds (``None``: unbounded; with ``host="thread"`` the calls then run
    in the caller's thread).

    ``env`` is an id (``gem.make`` builds it, with ``kwargs``), an :class:`~gem.Env` (its
    :meth:`~gem.Env.spawn` builds the hosted copy) or a zero-argument factory.
    ``env_id`` names the env in failures (default: the id, or the env's spec id).
    ``backend_kwargs`` go to the vector backend (``context`` for ``process``; ``address``,
    ``actor_options`` for ``ray``). Sync (:meth:`reset`, :meth:`step`) and async
    (:meth:`areset`, :meth:`astep`) calls; one call at a time. An env of this process whose
    ``areset``/``astep`` are its own coroutines runs them on the caller's event loop, bounded by
    the same timeout (the env is replaced after one overruns).
    """

    def __init__(self, env: EnvSource, *, host: str = "thread", step_timeout: float | None = DEFAULT_STEP_TIMEOUT,
                 backend_kwargs: dict[str, Any] | None = None, env_id: str | None = None, **kwargs: Any) -> None:
        if host not in HOSTS:
            raise ValueError(f"host must be one of {', '.join(HOSTS)}, got {host!r}")
        if isinstance(env, EnvFactory):
            env_id = env_id or env.env_id
        self.env_id = env_id or (env if isinstance(env, str) else getattr(getattr(env, "spec", None), "id", None))
        factory = env if isinstance(env, EnvFactory) and not kwargs else EnvFactory(env, dict(kwargs))
        self.host = host
        self.step_timeout = step_timeout
        options = dict(backend_kwargs or {})
        if host == "thread":
            options.setdefault("pool", _threads())
        self._vec = make_vector_env(HOSTS[host], [factory], env_ids=[self.env_id], seed=None,
                                    autoreset_mode=AutoresetMode.DISABLED, on_error="raise",
                                    step_timeout=step_timeout, **options)
        try:
            self.reward_range = tuple(self._vec.call("reward_range")[0])
        except Exception:  # an env without one, or one whose range does not cross: any reward
            self.reward_range = UNBOUNDED
        #: the last call's failure (``{"type", "message"}``), None after a call that succeeded
        self.failure: dict[str, str] | None = None
        #: the episode ended (by the env, or by a failure); :meth:`reset` starts the next
        self.done = True
        self._last_obs: Any = ""
        self._lock = threading.Lock()

    # -- the env API ----------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Start an episode: ``(obs, info)``; on failure ``("", {"failure": ...})`` and :attr:`done`."""
        with self._lock:
            try:
                (obs,), (info,) = self._vec.reset(seed=[seed], **kwargs)
            except VectorEnvError as exc:
                return "", self._ended(self._failure_of(exc))
            return self._began(obs, info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One step; a failure ends the episode truncated (see the module docstring)."""
        with self._lock:
            refused = self._refused()
            if refused is not None:
                return refused
            try:
                (obs,), (reward,), (terminated,), (truncated,), (info,) = self._vec.step([action])
            except VectorEnvError as exc:
                return self._cut(self._failure_of(exc))
            return self._stepped(obs, reward, terminated, truncated, info)

    async def areset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        env = self._native("areset")
        if env is None:
            return await self._off_loop(self.reset, seed, **kwargs)
        answer, failure = await self._bounded(env.areset(seed=seed, **kwargs), "reset")
        if failure is not None:
            return "", self._ended(failure)
        self._vec.slots[0].needs_reset = False
        return self._began(*answer)

    async def astep(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        env = self._native("astep")
        if env is None:
            return await self._off_loop(self.step, action)
        refused = self._refused()
        if refused is not None:
            return refused
        answer, failure = await self._bounded(env.astep(action), "step")
        return self._cut(failure) if failure is not None else self._stepped(*answer)

    @property
    def local_env(self) -> Env | None:
        """The env itself where it lives in this process (``host="thread"``), else None."""
        envs = getattr(self._vec, "envs", None)
        return envs[0] if envs else None

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the env's method ``name`` (or read its attribute) where it lives; raises
        :class:`~gem.errors.VectorEnvError` when that fails."""
        with self._lock:
            return self._vec.call(name, *args, **kwargs)[0]

    def close(self) -> None:
        self._vec.close()

    def __enter__(self) -> HostedEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<HostedEnv {self.env_id or '?'} host={self.host} step_timeout={self.step_timeout}>"

    # -- internals ------------------------------------------------------------------------
    def _began(self, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        self.failure, self.done, self._last_obs = None, False, obs
        return obs, info

    def _stepped(self, obs: Any, reward: Any, terminated: Any, truncated: Any,
                 info: dict[str, Any]) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.failure, self._last_obs = None, obs
        self.done = bool(terminated or truncated)
        return obs, float(reward), bool(terminated), bool(truncated), info

    def _refused(self) -> tuple[Any, float, bool, bool, dict[str, Any]] | None:
        """The answer to a step with no episode to step: after a reset that failed, that failure again;
        after an episode that ended, an error (the caller's bug, not the env's)."""
        if self.done and self.failure is not None:  # a reset that failed: the episode never began
            return self._last_obs, failure_reward(self.reward_range), False, True, {FAILURE: dict(self.failure)}
        if self.done:
            raise RuntimeError("this hosted env's episode is over; call reset() first")
        return None

    def _cut(self, failure: Failure) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """The step that ``failure`` ended: truncated, with the env's failure reward."""
        return self._last_obs, failure_reward(self.reward_range), False, True, self._ended(failure)

    def _ended(self, failure: Failure) -> dict[str, Any]:
        self.failure, self.done = {"type": failure.type, "message": failure.message}, True
        return {FAILURE: dict(self.failure), "error": failure.describe()}

    def _failure_of(self, exc: VectorEnvError) -> Failure:
        return next(iter(exc.failures.values()), None) or Failure.from_exc(0, self.env_id, exc)

    def _native(self, name: str) -> Env | None:
        """The env, where it lives here and its ``name`` (``areset``/``astep``) is its own coroutine (an env
        that awaits a subprocess or a server): called on the caller's loop, as it would be without the
        host, not from a thread (an env whose resources belong to one loop or thread keeps them)."""
        env = self.local_env
        if env is None or getattr(type(env), name) is getattr(Env, name):
            return None
        return env

    async def _bounded(self, call: Any, method: str) -> tuple[Any, Failure | None]:
        """``(answer, None)`` of a native coroutine, or ``(None, failure)`` when it raised or overran."""
        try:
            if self.step_timeout is None:
                return await call, None
            return await asyncio.wait_for(call, self.step_timeout), None
        except asyncio.TimeoutError as exc:
            if self.step_timeout is None:  # the env's own
                return None, Failure.from_exc(0, self.env_id, exc)
            self._vec.slots[0].replace()  # cancelled mid-call: the next episode gets a fresh env
            return None, timed_out(0, self.env_id, method, self.step_timeout, "the env was replaced by a fresh one")
        except Exception as exc:
            return None, Failure.from_exc(0, self.env_id, exc)

    async def _off_loop(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # the host's long-lived threads, not asyncio's default executor: a framework running hundreds of
        # episodes at once must not queue them behind a few threads (see _threads)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_callers(), lambda: fn(*args, **kwargs))


#: threads the hosted envs of this process share, started as calls need them and never ended: a sandbox
#: ties the processes it forks to the forking *thread* (PR_SET_PDEATHSIG, bwrap --die-with-parent), and
#: gem-envs-code keeps such processes (its judges, its zygote) for every env of the process, so a thread that
#: ended with one env would kill another env's test mid-run (an honest answer scored 0)
_SHARED: dict[str, Any] = {}
_SHARED_LOCK = threading.Lock()
#: at most this many calls run at once in them (more wait for a thread)
MAX_THREADS = 1024


def _threads() -> ThreadPool:
    """The pool that runs hosted envs' calls under their step timeout."""
    with _SHARED_LOCK:
        if "pool" not in _SHARED:
            _SHARED["pool"] = ThreadPool(MAX_THREADS, name="gem-hosted")
        return _SHARED["pool"]


def _callers() -> ThreadPoolExecutor:
    """The threads async callers hand a hosted env's blocking calls to."""
    with _SHARED_LOCK:
        if "callers" not in _SHARED:
            _SHARED["callers"] = ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="gem-hosted-caller")
        return _SHARED["callers"]


def close_threads(wait: float = 5.0) -> None:
    """End the hosted envs' shared threads (a later hosted env starts new ones): for a test that needs a
    process with one thread again, or an embedder shutting down. A thread inside a call ends when it returns."""
    with _SHARED_LOCK:
        pool, callers = _SHARED.pop("pool", None), _SHARED.pop("callers", None)
    if callers is not None:
        callers.shutdown(wait=False)
    if pool is not None:
        pool.close(wait)


#: idle hosted envs by (host, source, settings): a worker process or a Ray actor takes a second or more to
#: start, so an adapter playing thousands of episodes keeps them between episodes
_idle: dict[tuple, list[HostedEnv]] = {}
_idle_lock = threading.Lock()


@contextlib.contextmanager
def hosted(env: EnvSource, *, host: str = "thread", step_timeout: float | None = DEFAULT_STEP_TIMEOUT,
           backend_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> Iterator[HostedEnv]:
    """A :class:`HostedEnv` for one episode (or several), what the adapters use.

    With ``host="thread"`` a new env each time, closed after, as a plain ``gem.make`` would be.
    In a worker process or a Ray actor the handle goes back to a pool when the block ends and
    the next block with the same env (an id or an :class:`~gem.factory.EnvFactory`) and settings
    takes it (its next ``reset`` starts the episode; an env given as an object or a function is
    not pooled: two of them may not make the same env).

    >>> with hosted("game:GuessTheNumber-v0-easy", host="ray", step_timeout=60) as env:  # doctest: +SKIP
    ...     obs, info = env.reset(seed=0)
    """
    key = None
    if host != "thread" and isinstance(env, (str, EnvFactory)):
        key = (host, repr(env), step_timeout, repr(sorted((backend_kwargs or {}).items())),
               repr(sorted(kwargs.items())))
    handle = None
    if key is not None:
        with _idle_lock:
            if _idle.get(key):
                handle = _idle[key].pop()
    if handle is None:
        handle = HostedEnv(env, host=host, step_timeout=step_timeout, backend_kwargs=backend_kwargs, **kwargs)
    kept = False
    try:
        yield handle
        if key is not None:
            with _idle_lock:
                _idle.setdefault(key, []).append(handle)
            kept = True
    finally:
        if not kept:
            handle.close()


@atexit.register
def close_idle() -> None:
    """Close every pooled hosted env (at exit; call it to free their workers sooner)."""
    with _idle_lock:
        handles = [h for pool in _idle.values() for h in pool]
        _idle.clear()
    for handle in handles:
        with contextlib.suppress(Exception):
            handle.close()


__all__ = ["DEFAULT_STEP_TIMEOUT", "FAILURE", "HOSTS", "MAX_THREADS", "HostedEnv", "close_idle", "close_threads",
           "hosted"]
