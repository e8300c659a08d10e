"""Play multi-agent episodes with one policy per agent, or one shared policy (self-play).

Each agent's side of an episode is an ordinary :class:`gem.runner.Trajectory`: its own
observations, actions and rewards, so trainers and metrics written for single-agent
episodes take it unchanged. A reward an agent receives while another agent moves (the
loser's reward when the winner completes a line) is added to that agent's latest turn,
the move that led to it; the agent's trajectory ends when the game says it ends.

Episodes run concurrently like :func:`gem.runner.run_episodes`; inside an episode the
agents of a parallel (simultaneous-move) step are asked at the same time.

>>> async def solver(observation):
...     return "\\\\boxed{5}"
>>> games = gem.multiagent.run("multi:TicTacToe-v0", solver, seeds=range(4))  # self-play  # doctest: +SKIP
>>> games[0].agents["x"].total_return                                         # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gem.executor import ThreadPool
from gem.fingerprint import safe_fingerprint
from gem.host.threads import Lease, ThreadHost
from gem.multiagent.env import MultiAgentEnv
from gem.runner import EpisodeContext, Trajectory, Turn, _as_async, episode_seeds, within


@dataclass
class MultiAgentTrajectory:
    """One multi-agent episode: a :class:`~gem.runner.Trajectory` per agent that acted."""

    env_id: str | None
    seed: int | None
    episode: int
    agents: dict[str, Trajectory] = field(default_factory=dict)
    steps: int = 0
    error: str | None = None
    seconds: float = 0.0
    #: the game's content fingerprint (:mod:`gem.fingerprint`)
    fingerprint: str | None = None

    @property
    def returns(self) -> dict[str, float]:
        """Each agent's total reward."""
        return {agent: traj.total_return for agent, traj in self.agents.items()}


def make_game(env_id: str, **kwargs: Any) -> MultiAgentEnv:
    """The :class:`MultiAgentEnv` behind a registered id.

    ``multi:`` ids make an :class:`~gem.multiagent.OpponentEnv` (the single-agent view);
    this returns the game it plays on, built with ``kwargs``.
    """
    from gem.multiagent.opponent import OpponentEnv
    from gem.registration import make, spec

    env = make(env_id, **kwargs)
    game = env.game if isinstance(env, OpponentEnv) else env
    if not isinstance(game, MultiAgentEnv):
        raise TypeError(f"{env_id} is not a multi-agent env ({type(env).__name__})")
    game.env_id, game.spec = env_id, spec(env_id)
    return game


def _factory(env: str | MultiAgentEnv | Callable[[], MultiAgentEnv]) -> Callable[[], MultiAgentEnv]:
    if isinstance(env, str):
        return lambda: make_game(env)
    if isinstance(env, MultiAgentEnv):
        return lambda: env.spawn()  # type: ignore[return-value]
    if callable(env):
        return env
    raise TypeError(f"env must be an id, a MultiAgentEnv or a factory, got {type(env).__name__}")


async def run_multiagent_episodes(
    env: str | MultiAgentEnv | Callable[[], MultiAgentEnv],
    policies: Any,
    num_episodes: int | None = None,
    *,
    seeds: Iterable[int | None] | None = None,
    concurrency: int = 16,
    max_steps: int | None = None,
    on_error: str = "raise",
    step_timeout: float | None = None,
    episode_timeout: float | None = None,
) -> list[MultiAgentTrajectory]:
    """Play episodes; returns one :class:`MultiAgentTrajectory` per episode, in order.

    ``policies`` is one policy for every agent (self-play) or ``{agent: policy}``; a
    policy is what :func:`gem.runner.run_episodes` takes (``act(observation)``, optionally
    ``context``, async or not, returning an action or ``(action, info)``). The context's
    ``index`` is the episode and its ``turn`` counts the policy calls of the episode, so
    two seats sharing one seeded sampler never share a draw. ``max_steps`` truncates
    games after that many env steps. ``step_timeout`` and ``episode_timeout`` bound each
    game ``reset``/``step`` and a whole game as in :func:`gem.runner.run_episodes` (a game
    stuck in a call is never closed: a thread may still be inside it).
    """
    seed_list = episode_seeds(num_episodes, seeds, concurrency, on_error, step_timeout=step_timeout,
                              episode_timeout=episode_timeout)
    make = _factory(env)
    shared = None if isinstance(policies, dict) else _as_async(policies)
    table = {a: _as_async(p) for a, p in policies.items()} if isinstance(policies, dict) else {}
    semaphore = asyncio.Semaphore(concurrency)

    def policy_for(agent: str) -> Any:
        if shared is not None:
            return shared
        if agent not in table:
            raise KeyError(f"no policy for agent {agent!r} (policies for: {sorted(table)})")
        return table[agent]

    async def play(index: int, seed: int | None, record: MultiAgentTrajectory, lease: Lease) -> None:
        game = await host.lease(lease, make)
        record.env_id = game.env_id
        record.fingerprint = safe_fingerprint(game)
        observations, infos = await host.bind(lease, "reset")(seed)
        step = host.bind(lease, "step")
        calls = 0
        while not game.done:
            active = game.active_agents
            shown = {a: observations.get(a) or game.observe(a) for a in active}
            contexts = [EpisodeContext(index, seed, calls + i, record.env_id) for i in range(len(active))]
            calls += len(active)
            answers = await asyncio.gather(
                *(policy_for(a)(shown[a], lambda c=c: c) for a, c in zip(active, contexts))
            )
            actions, policy_infos = {}, {}
            for agent, answer in zip(active, answers):
                action, extra = answer if isinstance(answer, tuple) else (answer, {})
                actions[agent], policy_infos[agent] = str(action), extra
            t0 = time.perf_counter()
            observations, rewards, terms, truncs, step_infos = await step(actions)
            step_s = time.perf_counter() - t0
            record.steps += 1
            cut = max_steps is not None and record.steps >= max_steps and not game.done
            for agent in active:
                traj = record.agents.setdefault(agent, Trajectory(record.env_id, seed, index,
                                                                   infos.get(agent, {}),
                                                                   fingerprint=record.fingerprint))
                traj.turns.append(Turn(shown[agent], actions[agent], 0.0, False, False,
                                       step_infos.get(agent, {}), 0.0, step_s, policy_infos[agent]))
            for agent, traj in record.agents.items():
                last = traj.turns[-1]
                last.reward += float(rewards.get(agent, 0.0))
                if agent not in active and agent in step_infos:
                    last.info = {**last.info, **step_infos[agent]}
                last.terminated |= bool(terms.get(agent, False))
                last.truncated |= bool(truncs.get(agent, False)) or (cut and agent in game.agents)
            if cut:
                break
        for agent, traj in record.agents.items():
            traj.final_observation = observations.get(agent) if agent in observations else None

    async def episode(index: int, seed: int | None) -> MultiAgentTrajectory:
        async with semaphore:
            record = MultiAgentTrajectory(None, seed, index)
            start = time.perf_counter()
            lease = Lease()
            try:
                playing = play(index, seed, record, lease)
                await (playing if episode_timeout is None else within(episode_timeout, playing))
            except Exception as exc:
                if on_error == "raise":
                    raise
                record.error = f"{type(exc).__name__}: {exc}"
            finally:
                record.seconds = time.perf_counter() - start
                host.release(lease)
            for traj in record.agents.values():
                traj.seconds, traj.error = record.seconds, record.error
            return record

    # env calls run on a pool of this run's own, sized to its concurrency (as gem.runner's)
    with ThreadPool(concurrency, name="gem-multiagent") as pool, pool.installed():
        host = ThreadHost(pool, step_timeout, reuse=False)
        return list(await asyncio.gather(*(episode(i, s) for i, s in enumerate(seed_list))))


def run(env: str | MultiAgentEnv | Callable[[], MultiAgentEnv], policies: Any, num_episodes: int | None = None,
        **kwargs: Any) -> list[MultiAgentTrajectory]:
    """Synchronous :func:`run_multiagent_episodes` (starts its own event loop)."""
    return asyncio.run(run_multiagent_episodes(env, policies, num_episodes, **kwargs))
