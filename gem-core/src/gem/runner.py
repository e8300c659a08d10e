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
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gem.core import Env

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


def _env_factory(env: str | Env | Callable[[], Env], wrappers: Any, tokenizer: Any) -> Callable[[], Env]:
    from gem.registration import make
    from gem.wrappers import apply_wrappers

    if isinstance(env, str):
        base: Callable[[], Env] = lambda: make(env)  # noqa: E731
    elif isinstance(env, Env):
        base = lambda: env.spawn()  # noqa: E731
    elif callable(env):
        base = env
    else:
        raise TypeError(f"env must be an id, an Env or a factory, got {type(env).__name__}")
    if not wrappers:
        return base
    return lambda: apply_wrappers(base(), wrappers, tokenizer=tokenizer)


@dataclass(frozen=True)
class EpisodeContext:
    """Which episode a policy call belongs to; passed to policies that take ``context``."""

    index: int
    seed: int | None
    turn: int
    env_id: str | None


def _as_async(policy: Any) -> Callable[[Any, EpisodeContext], Awaitable[str]]:
    fn = getattr(policy, "act", policy)
    if not callable(fn):
        raise TypeError("policy must be an async function act(observation) -> str or have an .act method")
    try:
        wants_context = "context" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature
        wants_context = False

    async def call(observation: Any, context: EpisodeContext) -> str:
        result = fn(observation, context=context) if wants_context else fn(observation)
        if inspect.isawaitable(result):
            return await result
        return result

    return call


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
) -> list[Trajectory]:
    """Play episodes concurrently; returns one :class:`Trajectory` per episode, in order.

    ``env`` is an id, an env (copied with ``spawn()`` per concurrent episode) or a
    factory. ``seeds`` fixes each episode's reset seed (its length sets the number of
    episodes); ``max_turns`` truncates longer episodes; ``wrappers`` (names, applied in
    order) get ``tokenizer`` when they need one (``concat_chat``). With ``on_error="record"`` an
    episode whose env or policy raises is kept with ``trajectory.error`` set and the
    other episodes go on; ``"raise"`` re-raises the first error.

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
    make_env = _env_factory(env, wrappers, tokenizer)
    act = _as_async(policy)
    pool: asyncio.Queue[Env] = asyncio.Queue()
    created: list[Env] = []
    semaphore = asyncio.Semaphore(concurrency)

    async def get_env() -> Env:
        if pool.empty() and len(created) < concurrency:
            new = await asyncio.to_thread(make_env)
            created.append(new)
            return new
        return await pool.get()

    async def episode(index: int, seed: int | None) -> Trajectory:
        async with semaphore:
            traj = Trajectory(None, seed, index)
            start = time.perf_counter()
            env_: Env | None = None
            try:
                env_ = await get_env()
                traj.env_id = getattr(env_, "env_id", None)
                obs, traj.initial_info = await env_.areset(seed=seed)
                while max_turns is None or len(traj.turns) < max_turns:
                    t0 = time.perf_counter()
                    action = await act(obs, EpisodeContext(index, seed, len(traj.turns), traj.env_id))
                    policy_info: dict[str, Any] = {}
                    if isinstance(action, tuple):
                        action, policy_info = action
                    t1 = time.perf_counter()
                    next_obs, reward, terminated, truncated, info = await env_.astep(action)
                    t2 = time.perf_counter()
                    if max_turns is not None and len(traj.turns) + 1 >= max_turns and not terminated:
                        truncated = True
                    traj.turns.append(Turn(obs, action, float(reward), bool(terminated), bool(truncated), info,
                                           t1 - t0, t2 - t1, policy_info))
                    obs = next_obs
                    if terminated or truncated:
                        break
                traj.final_observation = obs
            except Exception as exc:
                if on_error == "raise":
                    raise
                traj.error = f"{type(exc).__name__}: {exc}"
            finally:
                traj.seconds = time.perf_counter() - start
                if env_ is not None:
                    pool.put_nowait(env_)
            if on_trajectory is not None:
                on_trajectory(traj)
            return traj

    try:
        return list(await asyncio.gather(*(episode(i, s) for i, s in enumerate(seed_list))))
    finally:
        for made in created:
            made.close()


def run(env: str | Env | Callable[[], Env], policy: Any, num_episodes: int | None = None, **kwargs: Any
        ) -> list[Trajectory]:
    """Synchronous :func:`run_episodes` (starts its own event loop)."""
    return asyncio.run(run_episodes(env, policy, num_episodes, **kwargs))
