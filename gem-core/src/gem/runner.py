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
import contextlib
import functools
import gc
import inspect
import itertools
import threading
import time
import types
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gem.core import Env
from gem.errors import EpisodeTimeoutError, StepTimeoutError
from gem.executor import ThreadPool
from gem.factory import EnvFactory
from gem.fingerprint import safe_fingerprint
from gem.host.processes import ProcessEnv, ProcessEnvs
from gem.host.threads import Lease, ThreadHost

Policy = Callable[[Any], Awaitable[str] | str]
T = TypeVar("T")


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
    #: the env's content fingerprint (:mod:`gem.fingerprint`; None for an env in a worker process)
    fingerprint: str | None = None

    @property
    def total_return(self) -> float:
        return sum(t.reward for t in self.turns)

    @property
    def done(self) -> bool:
        return bool(self.turns) and (self.turns[-1].terminated or self.turns[-1].truncated)

    def __len__(self) -> int:
        return len(self.turns)


@dataclass(frozen=True)
class EpisodeContext:
    """Which episode a policy call belongs to; passed to policies that take ``context``."""

    index: int
    seed: int | None
    turn: int
    env_id: str | None


def _policy_fn(policy: Any) -> tuple[Callable[..., Any], bool]:
    """``(act, wants_context)``: the function to call with each observation, and whether it
    takes a ``context`` keyword."""
    fn = getattr(policy, "act", policy)
    if not callable(fn):
        raise TypeError("policy must be an async function act(observation) -> str or have an .act method")
    try:
        wants_context = "context" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        wants_context = False
    return fn, wants_context


def _as_async(policy: Any) -> Callable[[Any, Callable[[], EpisodeContext]], Awaitable[Any]]:
    """``policy`` as ``await call(observation, context_factory)``; the context is built only
    for policies that take one."""
    fn, wants_context = _policy_fn(policy)

    async def call(observation: Any, context: Callable[[], EpisodeContext]) -> Any:
        result = fn(observation, context=context()) if wants_context else fn(observation)
        if inspect.isawaitable(result):
            return await result
        return result

    return call


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
    :mod:`gem.executor`. ``processes=N`` keeps the ``concurrency`` envs in N worker
    processes instead, each running its envs' calls concurrently in threads of its own
    (:mod:`gem.host.processes`): CPU-bound envs use every core, and hundreds of blocking
    envs split their threads over N interpreter locks. A worker that dies or hangs past
    ``step_timeout`` is killed and restarted; the call that killed it fails and its other
    envs go on from their state (:mod:`gem.host.recovery`): only an env without one, or
    whose replay answers otherwise, ends its episode with ``EpisodeLost``. ``env`` must be
    an id or a picklable factory when the process start method is not ``fork``.

    ``step_timeout`` bounds each env ``reset``/``step`` and ``episode_timeout`` a whole
    episode (policy time included), in seconds. An episode that overruns ends with
    ``error`` ``"StepTimeoutError: ..."`` / ``"EpisodeTimeoutError: ..."`` (raised with
    ``on_error="raise"``). An env caught inside a call that overran is dropped and a fresh
    one is built for later episodes; a thread stuck in a sync ``step`` cannot be killed,
    so it runs on in the background (a daemon thread) and the pool starts another
    (:mod:`gem.host.threads`).

    While the run is in progress the garbage collector's first-generation threshold is
    at least ``gc_threshold`` (see :data:`GC_THRESHOLD`; ``None`` leaves it alone); it is
    restored when the run, or the last of several concurrent runs, ends.

    A policy whose signature has a ``context`` parameter, ``act(observation, context)``,
    also gets an :class:`EpisodeContext` (episode index, seed, turn), e.g. to keep
    per-episode state. A policy may return ``(action, info)``: the dict is kept as the
    turn's ``policy_info`` (e.g. prompt and response token ids, sampler logprobs).

    ``seeds`` given as an iterator (not a list, tuple or range) streams: an episode starts whenever one of
    the ``concurrency`` slots frees, the iterator is read only then (it may be endless), each trajectory
    goes to ``on_trajectory`` as it finishes and the call returns ``[]`` once the iterator is exhausted
    and its episodes are done (a trainer keeps episodes in flight across its updates this way, cancelling
    the call when it stops).
    """
    make_env = EnvFactory(env, wrappers=wrappers or None, tokenizer=tokenizer)  # picklable: processes=N
    act, wants_context = _policy_fn(policy)

    async def play(index: int, seed: int | None, traj: Trajectory, env_: Any, reset: Callable[..., Awaitable[Any]],
                   step: Callable[..., Awaitable[Any]], remote: bool) -> None:
        traj.env_id = getattr(env_, "env_id", None)
        traj.fingerprint = None if remote else safe_fingerprint(env_)
        obs, traj.initial_info = await reset(seed)
        while max_turns is None or len(traj.turns) < max_turns:
            t0 = time.perf_counter()
            # the policy is called here, not through a wrapper coroutine: this is every step's path
            if wants_context:
                action = act(obs, context=EpisodeContext(index, seed, len(traj.turns), traj.env_id))
            else:
                action = act(obs)
            if type(action) is types.CoroutineType or (type(action) is not str and inspect.isawaitable(action)):
                action = await action
            policy_info: dict[str, Any] = {}
            if isinstance(action, tuple):
                action, policy_info = action
            t1 = time.perf_counter()
            next_obs, reward, terminated, truncated, info = await step(action)
            t2 = time.perf_counter()
            if max_turns is not None and len(traj.turns) + 1 >= max_turns and not terminated:
                truncated = True
            traj.turns.append(Turn(obs, action, float(reward), bool(terminated), bool(truncated), info,
                                   t1 - t0, t2 - t1, policy_info))
            obs = next_obs
            if terminated or truncated:
                break
        traj.final_observation = obs

    return await play_episodes(make_env, play, lambda index, seed: Trajectory(None, seed, index), seeds,
                               num_episodes=num_episodes, concurrency=concurrency, on_error=on_error,
                               on_record=on_trajectory, step_timeout=step_timeout, episode_timeout=episode_timeout,
                               threads=threads, processes=processes, gc_threshold=gc_threshold)


R = TypeVar("R")
#: ``await play(index, seed, record, env, reset, step, remote)``: one episode on a leased env,
#: filling in its record; ``reset``/``step`` are the env's calls under the run's step timeout,
#: ``remote`` says the env is in a worker process (:mod:`gem.host.processes`)
Play = Callable[[int, "int | None", Any, Any, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]], bool],
                Awaitable[None]]


async def play_episodes(make_env: Callable[[], Any], play: Play, new_record: Callable[[int, int | None], R],
                        seeds: Iterable[int | None] | None, *, num_episodes: int | None = None, concurrency: int = 16,
                        on_error: str = "raise", on_record: Callable[[R], Any] | None = None,
                        step_timeout: float | None = None, episode_timeout: float | None = None,
                        threads: int | None = None, processes: int | None = None,
                        gc_threshold: int | None = GC_THRESHOLD, reuse: bool = True) -> list[R]:
    """The orchestration of every runner (:func:`run_episodes`, :func:`gem.multiagent.run_multiagent_episodes`):
    ``concurrency`` episodes at a time, each on an env leased from the run's thread host or
    worker processes (``processes``), bounded by ``episode_timeout``, its error raised or
    recorded (``on_error``) on the record ``new_record(index, seed)`` makes, which ``play``
    fills in and ``on_record`` gets as it finishes. ``reuse``: envs serve later episodes
    (else each is closed when its episode ends). See :func:`run_episodes` for the rest."""
    streaming = isinstance(seeds, Iterator)
    if streaming and num_episodes is not None:
        raise ValueError("num_episodes with an iterator of seeds: the iterator decides how many episodes")
    seed_list = seeds if streaming else episode_seeds(num_episodes, seeds, concurrency, on_error,
                                                      step_timeout=step_timeout, episode_timeout=episode_timeout)
    if streaming:
        episode_seeds(0, [], concurrency, on_error, step_timeout=step_timeout, episode_timeout=episode_timeout)
    semaphore = asyncio.Semaphore(concurrency)
    pool = ThreadPool(threads or concurrency + max(4, concurrency // 4))
    host = ThreadHost(pool, step_timeout, reuse)
    remote: ProcessEnvs | None = None
    if processes is not None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        slots = concurrency if streaming else min(concurrency, len(seed_list)) or 1
        try:
            remote = ProcessEnvs(make_env, slots, processes, step_timeout, pool)
        except BaseException:
            pool.close()
            raise
        make_env = functools.partial(ProcessEnv, remote)

    async def leased(index: int, seed: int | None, record: R, lease: Lease) -> None:
        env_ = await host.lease(lease, make_env)
        await play(index, seed, record, env_, host.bind(lease, "reset", remote is not None),
                   host.bind(lease, "step", remote is not None), remote is not None)

    async def episode(index: int, seed: int | None) -> R:
        async with semaphore:
            record = new_record(index, seed)
            lease = Lease()
            start = time.perf_counter()
            try:
                playing = leased(index, seed, record, lease)
                await (playing if episode_timeout is None else within(episode_timeout, playing))
            except Exception as exc:
                if on_error == "raise":
                    raise
                record.error = f"{type(exc).__name__}: {exc}"  # type: ignore[attr-defined]
            finally:
                record.seconds = time.perf_counter() - start  # type: ignore[attr-defined]
                host.release(lease)
            if on_record is not None:
                on_record(record)
            return record

    tasks: set[asyncio.Future] | list[asyncio.Future]
    with pool.installed():  # tasks copy the context they are created in
        tasks = set() if streaming else [asyncio.ensure_future(episode(i, s)) for i, s in enumerate(seed_list)]
    try:
        with _young_generation(gc_threshold):
            if not streaming:
                return list(await asyncio.gather(*tasks))
            with pool.installed():
                await _stream(episode, seed_list, concurrency, tasks)  # type: ignore[arg-type]
            return []
    finally:
        running = list(tasks)  # a stream's set shrinks as its episodes end
        for task in running:  # after an error (on_error="raise") the other episodes stop too
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        host.close()
        if remote is not None:
            remote.close()


_END = object()


async def _stream(episode: Callable[[int, int | None], Awaitable[Trajectory]], seeds: Iterator[int | None],
                  concurrency: int, tasks: set[asyncio.Future]) -> None:
    """Start ``episode(index, seed)`` for each of ``seeds`` as a slot frees (at most ``concurrency`` running,
    all in ``tasks``); the first episode that raises (``on_error="raise"``) stops the stream with its error."""
    slots = asyncio.Semaphore(concurrency)
    failed: list[BaseException] = []

    def finished(task: asyncio.Future) -> None:
        tasks.discard(task)
        slots.release()
        if not task.cancelled() and task.exception() is not None:
            failed.append(task.exception())  # type: ignore[arg-type]

    for index in itertools.count():
        await slots.acquire()  # then read the next seed: the iterator runs no further ahead than the episodes
        if failed:
            raise failed[0]
        seed = next(seeds, _END)
        if seed is _END:
            break
        task = asyncio.ensure_future(episode(index, seed))
        tasks.add(task)
        task.add_done_callback(finished)
    while tasks:
        await asyncio.wait(set(tasks))
    if failed:
        raise failed[0]


def episode_seeds(num_episodes: int | None, seeds: Iterable[int | None] | None, concurrency: int,
                  on_error: str, **timeouts: float | None) -> list[int | None]:
    """The reset seed of each episode of a run (``None``: the env's own stream), checking the
    arguments every runner takes (``timeouts``: by name, in seconds)."""
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error must be 'raise' or 'record', got {on_error!r}")
    seed_list = list(seeds) if seeds is not None else [None] * (num_episodes if num_episodes is not None else 1)
    if num_episodes is not None and seeds is not None and num_episodes != len(seed_list):
        raise ValueError(f"num_episodes={num_episodes} but {len(seed_list)} seeds")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    for name, value in timeouts.items():
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be > 0 seconds, got {value}")
    return seed_list


async def within(seconds: float | None, episode: Awaitable[T]) -> T:
    """Await ``episode``, raising :class:`~gem.errors.EpisodeTimeoutError` after ``seconds``
    (``None``: no limit); a step timeout inside it stays a step timeout."""
    if seconds is None:
        return await episode
    try:
        return await asyncio.wait_for(episode, seconds)
    except StepTimeoutError:
        raise
    except asyncio.TimeoutError:
        raise EpisodeTimeoutError(f"episode did not finish within {seconds} s") from None


def run(env: str | Env | Callable[[], Env], policy: Any, num_episodes: int | None = None, **kwargs: Any
        ) -> list[Trajectory]:
    """Synchronous :func:`run_episodes` (starts its own event loop)."""
    return asyncio.run(run_episodes(env, policy, num_episodes, **kwargs))
