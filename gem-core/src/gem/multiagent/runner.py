"""Play multi-agent episodes with one policy per agent, or one shared policy (self-play).

Each agent's side of an episode is an ordinary :class:`gem.runner.Trajectory`: its own
observations, actions and rewards, so trainers and metrics written for single-agent
episodes take it unchanged. A reward an agent receives while another agent moves (the
loser's reward when the winner completes a line) is added to that agent's latest turn,
the move that led to it; the agent's trajectory ends when the game says it ends.

Episodes run concurrently, orchestrated as :func:`gem.runner.run_episodes`' (its
:func:`~gem.runner.play_episodes`: the same timeouts, errors, thread host and, with
``processes=N``, the same worker processes); inside an episode the agents of a parallel
(simultaneous-move) step are asked at the same time.

>>> async def solver(observation):
...     return "\\\\boxed{5}"
>>> games = gem.multiagent.run("multi:TicTacToe-v0", solver, seeds=range(4))  # self-play  # doctest: +SKIP
>>> games[0].agents["x"].total_return                                         # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gem.executor import run_blocking
from gem.fingerprint import safe_fingerprint
from gem.multiagent.env import MultiAgentEnv
from gem.runner import EpisodeContext, Trajectory, Turn, _as_async, play_episodes


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


class Table:
    """A game as a run plays it, in the run's threads or a worker process alike: its
    ``reset`` and ``step`` answer, beside the game's own results, what the run asks of the
    game between two steps (:meth:`view`), so that a game in a worker process needs no call
    for it. ``step`` answers in the shape of an env's step, ``(answer, 0.0, done, False, {})``,
    which the host's slots take as they take any env's (snapshots and replays included)."""

    def __init__(self, game: MultiAgentEnv) -> None:
        self.game = game
        self.env_id = getattr(game, "env_id", None)

    def view(self, observations: dict[str, Any]) -> dict[str, Any]:
        """Whether the game is over, its agents, the active ones and what each of them is shown."""
        game = self.game
        active = [] if game.done else game.active_agents
        return {"done": game.done, "agents": list(game.agents), "active": active,
                "shown": {a: observations.get(a) or game.observe(a) for a in active}}

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        observations, infos = self.game.reset(seed=seed, **kwargs)
        return (observations, infos, self.view(observations)), {}

    def step(self, actions: dict[str, str]) -> tuple[tuple[Any, ...], float, bool, bool, dict[str, Any]]:
        observations, rewards, terms, truncs, infos = self.game.step(actions)
        view = self.view(observations)
        return (observations, rewards, terms, truncs, infos, view), 0.0, view["done"], False, {}

    async def areset(self, seed: int | None = None) -> Any:
        return await run_blocking(self.reset, seed)

    async def astep(self, actions: dict[str, str]) -> Any:
        return await run_blocking(self.step, actions)

    def get_state(self) -> Any:
        return self.game.get_state()

    def set_state(self, state: Any) -> None:
        self.game.set_state(state)

    def close(self) -> None:
        self.game.close()


@dataclass
class GameFactory:
    """Makes a :class:`Table` from ``env`` (an id, a game to copy or a factory); picklable where
    ``env`` is, for games in worker processes."""

    env: str | MultiAgentEnv | Callable[[], MultiAgentEnv]

    def __post_init__(self) -> None:
        if not isinstance(self.env, (str, MultiAgentEnv)) and not callable(self.env):
            raise TypeError(f"env must be an id, a MultiAgentEnv or a factory, got {type(self.env).__name__}")

    def __call__(self) -> Table:
        if isinstance(self.env, str):
            return Table(make_game(self.env))
        if isinstance(self.env, MultiAgentEnv):
            return Table(self.env.spawn())  # type: ignore[arg-type]
        return Table(self.env())


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
    processes: int | None = None,
) -> list[MultiAgentTrajectory]:
    """Play episodes; returns one :class:`MultiAgentTrajectory` per episode, in order.

    ``policies`` is one policy for every agent (self-play) or ``{agent: policy}``; a
    policy is what :func:`gem.runner.run_episodes` takes (``act(observation)``, optionally
    ``context``, async or not, returning an action or ``(action, info)``). The context's
    ``index`` is the episode and its ``turn`` counts the policy calls of the episode, so
    two seats sharing one seeded sampler never share a draw. ``max_steps`` truncates
    games after that many env steps. ``step_timeout`` and ``episode_timeout`` bound each
    game ``reset``/``step`` and a whole game as in :func:`gem.runner.run_episodes` (a game
    stuck in a call is never closed: a thread may still be inside it). ``processes=N`` keeps
    the games in N worker processes, as :func:`gem.runner.run_episodes` does its envs (a
    worker that dies or hangs is restarted; its other games go on from their state); ``env``
    must then be an id or a picklable factory when the start method is not ``fork``.
    """
    shared = None if isinstance(policies, dict) else _as_async(policies)
    table = {a: _as_async(p) for a, p in policies.items()} if isinstance(policies, dict) else {}

    def policy_for(agent: str) -> Any:
        if shared is not None:
            return shared
        if agent not in table:
            raise KeyError(f"no policy for agent {agent!r} (policies for: {sorted(table)})")
        return table[agent]

    async def play(index: int, seed: int | None, record: MultiAgentTrajectory, played: Table,
                   reset: Callable[..., Awaitable[Any]], step: Callable[..., Awaitable[Any]], remote: bool) -> None:
        record.env_id = played.env_id
        record.fingerprint = None if remote else safe_fingerprint(played.game)
        (observations, infos, view), _ = await reset(seed)
        calls = 0
        while not view["done"]:
            active, shown = view["active"], view["shown"]
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
            (observations, rewards, terms, truncs, step_infos, view), *_ = await step(actions)
            step_s = time.perf_counter() - t0
            record.steps += 1
            cut = max_steps is not None and record.steps >= max_steps and not view["done"]
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
                last.truncated |= bool(truncs.get(agent, False)) or (cut and agent in view["agents"])
            if cut:
                break
        for agent, traj in record.agents.items():
            traj.final_observation = observations.get(agent) if agent in observations else None

    def finished(record: MultiAgentTrajectory) -> None:
        for traj in record.agents.values():
            traj.seconds, traj.error = record.seconds, record.error

    # games are not reused across episodes: each is closed when its episode ends
    return await play_episodes(GameFactory(env), play, lambda index, seed: MultiAgentTrajectory(None, seed, index),
                               seeds, num_episodes=num_episodes, concurrency=concurrency, on_error=on_error,
                               on_record=finished, step_timeout=step_timeout, episode_timeout=episode_timeout,
                               processes=processes, reuse=False)


def run(env: str | MultiAgentEnv | Callable[[], MultiAgentEnv], policies: Any, num_episodes: int | None = None,
        **kwargs: Any) -> list[MultiAgentTrajectory]:
    """Synchronous :func:`run_multiagent_episodes` (starts its own event loop)."""
    return asyncio.run(run_multiagent_episodes(env, policies, num_episodes, **kwargs))
