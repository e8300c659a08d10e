"""Self-play: the learning policy plays every seat of a multi-agent game (``env.selfplay=true``).

The game behind the env id (a ``multi:`` id makes an :class:`~gem.multiagent.OpponentEnv`;
its ``game`` is played here) runs under gem's multi-agent runner with one shared policy.
Each seat's side of a game becomes one :class:`~gem_train.rollout.Episode` of its own
turns and rewards, so advantages (ReBN's batch-normalised per-turn returns, GRPO's
groups) are computed per seat exactly as for single-agent episodes: a seat's return never
mixes in the other seat's rewards. Evaluation still plays the env id as registered
(against its scripted opponent).

>>> episodes = collect_selfplay(make_env, policy, seeds=range(4))   # doctest: +SKIP
>>> len(episodes)                                                   # two per game of a two-seat game  # doctest: +SKIP
8
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from gem.multiagent import MultiAgentEnv, run_multiagent_episodes
from gem.runner import Trajectory
from gem_train.rollout import EnginePolicy, Episode


def game_of(env: Any) -> MultiAgentEnv:
    """The multi-agent game an env plays on (itself, or the ``game`` of its unwrapped single-agent view)."""
    inner = getattr(env, "unwrapped", env)
    game = inner if isinstance(inner, MultiAgentEnv) else getattr(inner, "game", None)
    if not isinstance(game, MultiAgentEnv):
        raise TypeError(f"env.selfplay needs a multi-agent env (a multi: id), got {type(inner).__name__}")
    return game


def collect_selfplay(
    make_env: Callable[[], Any],
    policy: EnginePolicy,
    seeds: Sequence[int],
    groups: Sequence[int] | None = None,
    concurrency: int = 32,
    max_turns: int | None = None,
    *,
    step_timeout: float | None = None,
    episode_timeout: float | None = None,
) -> list[Episode]:
    """Play one game per seed with ``policy`` in every seat; returns one episode per seat that moved, in
    seed order (seats in the game's agent order), each in its game's group. ``max_turns`` caps env steps.

    ``step_timeout`` and ``episode_timeout`` are gem's multi-agent runner's, as in
    :func:`~gem_train.rollout.collect`: with either, a game that fails ends alone and each of its seats'
    episodes (one without turns, if no seat moved) has :attr:`Episode.error` set; only when every game
    failed is the first error raised."""
    seeds = list(seeds)
    if not seeds:
        return []
    limited = step_timeout is not None or episode_timeout is not None
    games = asyncio.run(run_multiagent_episodes(
        lambda: game_of(make_env()), policy, seeds=seeds, concurrency=concurrency, max_steps=max_turns,
        on_error="record" if limited else "raise", step_timeout=step_timeout, episode_timeout=episode_timeout,
    ))
    if limited and all(game.error for game in games):
        raise RuntimeError(f"every one of {len(games)} self-play games failed, the first with {games[0].error}")
    groups = list(groups) if groups is not None else list(range(len(games)))
    episodes = []
    for game, group in zip(games, groups):
        if game.error is not None and not game.agents:  # failed before any seat moved: still counted as a fault
            episodes.append(Episode(game.seed, group, [], Trajectory(game.env_id, game.seed, game.episode,
                                                                     error=game.error)))
        for traj in game.agents.values():
            samples = [turn.policy_info["sample"] for turn in traj.turns]
            for sample, turn in zip(samples, traj.turns):
                sample.reward = turn.reward
            episodes.append(Episode(traj.seed, group, samples, traj))
    return episodes
