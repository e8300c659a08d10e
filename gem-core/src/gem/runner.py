"""Run many episodes concurrently against an async policy.

Each episode steps as soon as its own action is ready: there is no lockstep barrier,
so one slow generation or slow tool call holds back only its own episode. Training
and evaluation both collect experience through :func:`run_episodes`.

>>> async def act(observation):
...     return "\\\\boxed{5}"
>>> trajectories = gem.runner.run("game:GuessTheNumber-v0-easy", act, seeds=range(8))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import gc
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gem.core import Env
from gem.errors import EpisodeTimeoutError, StepTimeoutError, VectorEnvError
from gem.executor import ThreadPool
from gem.vector.base import Call
from gem.vector.slot import Failure

Policy = Callable[[Any], Awaitable[str] | str]


@dataclass
class Turn:
    """One step of an episode: what the agent saw, did, and got."""

    observation: Any
    action: str
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    act_seconds: float = 0.0
    step_seconds: float = 0.0
    #: what the policy returned beside the action (token ids, logprobs, ...)
    policy_info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trajectory:
    """One episode."""

    env_id: str | None
    seed: int | None
    episode: int
    initial_info: dict[str, Any] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)
    final_observation: Any = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def total_return(self) -> float:
        return sum(t.reward for t in self.turns)

    @property
    def done(self) -> bool:
        return bool(self.turns) and (self.turns[-1].terminated or self.turns[-1].truncated)

    def __len__(self) -> int:
        return len(self.turns)


def _wrapped(base: Callable[[], Env], wrappers: Any, tokenizer: Any) -> Env:
    from gem.wrappers import apply_wrappers

    return apply_wrappers(base(), wrappers, tokenizer=tokenizer)


def _env_factory(env: str | Env | Callable[[], Env], wrappers: Any, tokenizer: Any) -> Callable[[], Env]:
    # partials, not lambdas: with processes=N the factory may have to be pickled
    from gem.registration import make

    if isinstance(env, str):
        base: Callable[[], Env] = functools.partial(make, env)
    elif isinstance(env, Env):
        base = env.spawn
    elif callable(env):
        base = env
    else:
        raise TypeError(f"env must be an id, an Env or a factory, got {type(env).__name__}")
    if not wrappers:
        return base
    return functools.partial(_wrapped, base, wrappers, tokenizer)


@dataclass(frozen=True)
class EpisodeContext:
    """Which episode a policy call belongs to; passed to policies that take ``context``."""

    index: int
    seed: int | None
    turn: int
    env_id: str | None


def _as_async(policy: Any) -> Callable[[Any, Callable[[], EpisodeContext]], Awaitable[Any]]:
    """``policy`` as ``await call(observation, context_factory)``; the context is built only
    for policies that take one (it is on every step's path)."""
    fn = getattr(policy, "act", policy)
    if not callable(fn):
        raise TypeError("policy must be an async function act(observation) -> str or have an .act method")
    try:
        wants_context = "context" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        wants_context = False

    async def call(observation: Any, context: Callable[[], EpisodeContext]) -> Any:
        result = fn(observation, context=context()) if wants_context else fn(observation)
        if inspect.isawaitable(result):
            return await result
        return result

    return call


class _ProcessEnvs:
    """The envs of a run with ``processes=N``: ``slots`` envs spread over N worker
    processes. Each worker is a one-worker
    :class:`~gem.vector.process.ProcessVectorEnv` (autoreset off) with its own
    dispatcher: the calls pending for it run as one batch while the next one gathers,
    and workers never wait for each other."""

    def __init__(self, make_env: Callable[[], Env], slots: int, processes: int, step_timeout: float | None,
                 pool: ThreadPool) -> None:
        workers = max(1, min(processes, slots))
        self.workers: list[_ProcessWorker] = []
        try:
            for w in range(workers):
                self.workers.append(_ProcessWorker(make_env, len(range(w, slots, workers)), step_timeout, pool))
        except BaseException:
            self.close()
            raise
        self.env_id = self.workers[0].vec.call("env_id", indices=[0])[0]
        # slots taken in turn from each worker, so that a run with fewer episodes still uses them all
        self.free = collections.deque(
            (worker, i) for i in range(max(w.vec.num_envs for w in self.workers)) for worker in self.workers
            if i < worker.vec.num_envs)

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


class _ProcessWorker:
    """One worker process of :class:`_ProcessEnvs` and the dispatcher that feeds it."""

    def __init__(self, make_env: Callable[[], Env], slots: int, step_timeout: float | None, pool: ThreadPool) -> None:
        from gem.vector.process import ProcessVectorEnv

        self.vec = ProcessVectorEnv([make_env] * slots, num_workers=1, seed=None, autoreset_mode="disabled",
                                    step_timeout=step_timeout)
        self._pool = pool
        self._pending: list[tuple[Call, asyncio.Future]] = []
        self._wake = asyncio.Event()
        self._dispatcher = asyncio.ensure_future(self._dispatch())

    async def call(self, index: int, method: str, args: tuple) -> Any:
        entry = ((index, method, args, {}), asyncio.get_running_loop().create_future())
        self._pending.append(entry)
        self._wake.set()
        try:
            return await entry[1]
        except asyncio.CancelledError:
            # not sent yet: withdraw it. Sent: it finishes in its batch before this env's next call
            # runs (batches run one after another), so the env can be reused either way
            if entry in self._pending:
                self._pending.remove(entry)
            raise

    async def _dispatch(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            try:
                results = await self._pool.run(self.vec._execute, [call for call, _ in batch])
            except Exception as exc:  # the vector env itself broke: every caller hears of it
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results):
                if future.done():
                    continue
                if not isinstance(result, Failure):
                    future.set_result(result)
                elif result.type == "StepTimeout":
                    future.set_exception(StepTimeoutError(result.describe()))
                else:
                    future.set_exception(VectorEnvError(f"{result.describe()}\n{result.traceback}", result.index,
                                                        result.env_id))

    def close(self) -> None:
        self._dispatcher.cancel()
        self.vec.close()


class _ProcessEnv:
    """One slot of :class:`_ProcessEnvs`, with the async half of the Env API the runner uses."""

    def __init__(self, envs: _ProcessEnvs) -> None:
        self.worker, self.index = envs.free.popleft()
        self.env_id = envs.env_id

    async def areset(self, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        return await self.worker.call(self.index, "reset", (seed, {}))

    async def astep(self, action: str) -> Any:
        return await self.worker.call(self.index, "step", (action,))

    def close(self) -> None:
        """The slot's env closes with the others, in :meth:`_ProcessEnvs.close`."""


#: the collector's first-generation threshold while runs are in progress (CPython's default
#: is 700). Hundreds of in-flight steps keep their futures, contexts and frames alive for
#: the length of a call, so the young generation fills with live objects: at 700 the
#: collector ran every ~150 steps, each pass holding the GIL about 1 ms, and every thread
#: waiting on it (256 blocking envs: 73 % of the ideal at 700, 88 % at 7000 on a 2-core
#: machine, ``bench/bench_runner.py``). Older generations keep their ratios.
GC_THRESHOLD = 7000
_gc_lock = threading.Lock()
_gc_runs: list[tuple[int, int, int]] = []  # the thresholds to restore, one entry per run in progress


@contextlib.contextmanager
def _young_generation(threshold: int | None) -> Iterator[None]:
    """Raise the collector's first threshold to ``threshold`` for the duration (never lower
    it, never turn on a collector that ``gc.set_threshold(0)`` turned off); the last of
    several concurrent runs to end restores the original."""
    if threshold is None:
        yield
        return
    with _gc_lock:
        before = gc.get_threshold()
        _gc_runs.append(before)
        if threshold > before[0] > 0:  # 0 means automatic collection is off: left off
            gc.set_threshold(threshold, *before[1:])
    try:
        yield
    finally:
        with _gc_lock:
            first = _gc_runs[0]
            _gc_runs.pop()
            if not _gc_runs:
                gc.set_threshold(*first)


class _Episode:
    """What one running episode holds that its timeout must know about."""

    __slots__ = ("env", "env_busy")

    def __init__(self) -> None:
        self.env: Env | None = None
        self.env_busy = False  # inside reset/step: after a timeout the env cannot be reused


async def run_episodes(
    env: str | Env | Callable[[], Env],
    policy: Any,
    num_episodes: int | None = None,
    *,
    seeds: Iterable[int | None] | None = None,
    concurrency: int = 16,
    max_turns: int | None = None,
    wrappers: str | list[str] | None = None,
    tokenizer: Any = None,
    on_error: str = "raise",
    on_trajectory: Callable[[Trajectory], Any] | None = None,
    step_timeout: float | None = None,
    episode_timeout: float | None = None,
    threads: int | None = None,
    processes: int | None = None,
    gc_threshold: int | None = GC_THRESHOLD,
) -> list[Trajectory]:
    """Play episodes concurrently; returns one :class:`Trajectory` per episode, in order.

    ``env`` is an id, an env (copied with ``spawn()`` per concurrent episode) or a
    factory. ``seeds`` fixes each episode's reset seed (its length sets the number of
    episodes); ``max_turns`` truncates longer episodes; ``wrappers`` (names, applied in
    order) get ``tokenizer`` when they need one (``concat_chat``). With ``on_error="record"`` an
    episode whose env or policy raises is kept with ``trajectory.error`` set and the
    other episodes go on; ``"raise"`` cancels the other episodes and re-raises the first error.

    Envs without a native ``astep`` step in a thread pool that this call owns, with up to
    ``threads`` threads (default: ``concurrency`` and a quarter more, so every episode can
    be inside a blocking step at once while some threads still hand results back); see
    :mod:`gem.executor`. For CPU-bound envs, ``processes=N``
    keeps ``concurrency`` envs in N worker processes instead (the process vector env's
    workers: a worker that dies or hangs past ``step_timeout`` is restarted, and the
    episodes it held end with an error); ``env`` must then be an id or a picklable factory
    when the process start method is not ``fork``.

    ``step_timeout`` bounds each env ``reset``/``step`` and ``episode_timeout`` a whole
    episode (policy time included), in seconds. An episode that overruns ends with
    ``error`` ``"StepTimeoutError: ..."`` / ``"EpisodeTimeoutError: ..."`` (raised with
    ``on_error="raise"``). An env caught inside a call that overran is dropped and a fresh
    one is built for later episodes; a thread stuck in a sync ``step`` cannot be killed,
    so it runs on in the background (a daemon thread) and the pool starts another.

    While the run is in progress the garbage collector's first-generation threshold is
    at least ``gc_threshold`` (see :data:`GC_THRESHOLD`; ``None`` leaves it alone); it is
    restored when the run, or the last of several concurrent runs, ends.

    A policy whose signature has a ``context`` parameter, ``act(observation, context)``,
    also gets an :class:`EpisodeContext` (episode index, seed, turn), e.g. to keep
    per-episode state. A policy may return ``(action, info)``: the dict is kept as the
    turn's ``policy_info`` (e.g. prompt and response token ids, sampler logprobs).
    """
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}")
    seed_list = list(seeds) if seeds is not None else [None] * (num_episodes if num_episodes is not None else 1)
    if num_episodes is not None and seeds is not None and num_episodes != len(seed_list):
        raise ValueError(f"num_episodes={num_episodes} but {len(seed_list)} seeds")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    for name, value in (("step_timeout", step_timeout), ("episode_timeout", episode_timeout)):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be > 0 seconds, got {value}")
    make_env = _env_factory(env, wrappers, tokenizer)
    act = _as_async(policy)
    idle: list[Env] = []  # envs between episodes, reused by the next one
    created: list[Env] = []
    abandoned: set[int] = set()  # ids of envs left inside a call that overran
    semaphore = asyncio.Semaphore(concurrency)
    pool = ThreadPool(threads or concurrency + max(4, concurrency // 4))
    remote: _ProcessEnvs | None = None
    if processes is not None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        remote = _ProcessEnvs(make_env, min(concurrency, len(seed_list)) or 1, processes, step_timeout, pool)
        make_env = functools.partial(_ProcessEnv, remote)

    async def env_call(state: _Episode, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        # env_busy stays set when the call did not end (a step timeout, or the episode
        # cancelled by its timeout): a thread may still be inside the env, never reuse it
        state.env_busy = True
        try:
            if step_timeout is None or remote is not None:  # worker processes enforce their own timeout
                result = await fn(*args)
            else:
                result = await asyncio.wait_for(fn(*args), step_timeout)
        except asyncio.TimeoutError:
            raise StepTimeoutError(f"env {fn.__name__.lstrip('a')} did not return within {step_timeout} s") from None
        except Exception:  # the env raised: its call is over
            state.env_busy = False
            raise
        state.env_busy = False
        return result

    async def play(index: int, seed: int | None, traj: Trajectory, state: _Episode) -> None:
        if idle:
            state.env = idle.pop()
        else:
            state.env_busy = True  # a constructor that hangs is as stuck as a step that hangs
            state.env = await pool.run(make_env)
            state.env_busy = False
            created.append(state.env)
        env_ = state.env
        traj.env_id = getattr(env_, "env_id", None)
        obs, traj.initial_info = await env_call(state, env_.areset, seed)
        # an env whose astep is the base class's thread hop steps in this run's pool directly:
        # two coroutine layers fewer on every step (native astep, wrappers, timeouts: as written)
        direct = step_timeout is None and type(env_).astep is Env.astep
        while max_turns is None or len(traj.turns) < max_turns:
            t0 = time.perf_counter()
            action = await act(obs, lambda: EpisodeContext(index, seed, len(traj.turns), traj.env_id))
            policy_info: dict[str, Any] = {}
            if isinstance(action, tuple):
                action, policy_info = action
            t1 = time.perf_counter()
            if direct:  # as env_call does
                state.env_busy = True
                try:
                    next_obs, reward, terminated, truncated, info = await pool.run(env_.step, action)
                except Exception:
                    state.env_busy = False
                    raise
                state.env_busy = False
            else:
                next_obs, reward, terminated, truncated, info = await env_call(state, env_.astep, action)
            t2 = time.perf_counter()
            if max_turns is not None and len(traj.turns) + 1 >= max_turns and not terminated:
                truncated = True
            traj.turns.append(Turn(obs, action, float(reward), bool(terminated), bool(truncated), info,
                                   t1 - t0, t2 - t1, policy_info))
            obs = next_obs
            if terminated or truncated:
                break
        traj.final_observation = obs

    async def episode(index: int, seed: int | None) -> Trajectory:
        async with semaphore:
            traj = Trajectory(None, seed, index)
            state = _Episode()
            start = time.perf_counter()
            try:
                if episode_timeout is None:
                    await play(index, seed, traj, state)
                else:
                    try:
                        await asyncio.wait_for(play(index, seed, traj, state), episode_timeout)
                    except StepTimeoutError:
                        raise
                    except asyncio.TimeoutError:
                        raise EpisodeTimeoutError(f"episode did not finish within {episode_timeout} s") from None
            except Exception as exc:
                if on_error == "raise":
                    raise
                traj.error = f"{type(exc).__name__}: {exc}"
            finally:
                traj.seconds = time.perf_counter() - start
                if state.env_busy and not isinstance(state.env, _ProcessEnv):  # stuck in a call: never reuse it
                    pool.abandon()
                    if state.env is not None:
                        abandoned.add(id(state.env))
                elif state.env is not None:
                    idle.append(state.env)
            if on_trajectory is not None:
                on_trajectory(traj)
            return traj

    with pool.installed():  # tasks copy the context they are created in
        tasks = [asyncio.ensure_future(episode(i, s)) for i, s in enumerate(seed_list)]
    try:
        with _young_generation(gc_threshold):
            return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:  # after an error (on_error="raise") the other episodes stop too
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        pool.close()
        if remote is not None:
            remote.close()
        for made in created:
            if id(made) not in abandoned:
                made.close()


def run(env: str | Env | Callable[[], Env], policy: Any, num_episodes: int | None = None, **kwargs: Any
        ) -> list[Trajectory]:
    """Synchronous :func:`run_episodes` (starts its own event loop)."""
    return asyncio.run(run_episodes(env, policy, num_episodes, **kwargs))
