"""Per-turn returns and advantages.

A batch is a flat list of turns from many episodes. Every token of a turn's response
gets that turn's advantage, so everything here works on one number per turn (or per
episode, for GRPO).

>>> discounted_returns([0.0, 0.0, 1.0], gamma=0.5)
[0.25, 0.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

EPS = 1e-6


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Monte-Carlo return of each turn of one episode: ``G_t = sum_k gamma^k r_{t+k}``."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def rebn_advantages(returns: torch.Tensor, normalize_std: bool = True) -> torch.Tensor:
    """ReBN: per-turn returns normalised over all turns of the batch.

    returns: (N,) one return per turn, all episodes together -> (N,) advantages.

    >>> rebn_advantages(torch.tensor([1.0, 3.0])).tolist()
    [-0.7071..., 0.7071...]  # doctest: +SKIP
    """
    centred = returns - returns.mean()
    if not normalize_std or returns.numel() < 2:
        return centred
    return centred / (returns.std() + EPS)


def grpo_advantages(episode_returns: torch.Tensor, groups: torch.Tensor, normalize_std: bool = True) -> torch.Tensor:
    """GRPO: each episode's return normalised within its group (episodes from one initial state).

    episode_returns: (E,), groups: (E,) integer group ids -> (E,) advantages.
    """
    out = torch.zeros_like(episode_returns)
    for g in torch.unique(groups):
        idx = groups == g
        values = episode_returns[idx]
        centred = values - values.mean()
        if normalize_std and values.numel() > 1:
            centred = centred / (values.std() + EPS)
        out[idx] = centred
    return out


def turn_advantages(
    rewards: Sequence[Sequence[float]],
    groups: Sequence[int],
    estimator: str,
    gamma: float,
    normalize_std: bool = True,
) -> list[list[float]]:
    """Advantages of every turn of every episode (same nesting as ``rewards``).

    ``estimator``: ``rebn`` (discounted per-turn returns, normalised over all turns),
    ``grpo`` (the episode's undiscounted return normalised within its group, given to
    every turn) or ``reinforce`` (raw discounted per-turn returns).

    >>> turn_advantages([[0.0, 1.0], [0.0]], [0, 1], "reinforce", gamma=1.0)
    [[1.0, 1.0], [0.0]]
    """
    if estimator == "grpo":
        totals = torch.tensor([float(sum(r)) for r in rewards])
        adv = grpo_advantages(totals, torch.tensor(list(groups)), normalize_std).tolist()
        return [[a] * len(r) for a, r in zip(adv, rewards)]
    per_episode = [discounted_returns(r, gamma) for r in rewards]
    if estimator == "reinforce":
        return per_episode
    if estimator != "rebn":
        raise ValueError(f"unknown advantage estimator {estimator!r}")
    flat = torch.tensor([g for ep in per_episode for g in ep], dtype=torch.float64)
    if flat.numel() == 0:
        return [[] for _ in rewards]
    normed = rebn_advantages(flat, normalize_std).tolist()
    out, i = [], 0
    for ep in per_episode:
        out.append(normed[i:i + len(ep)])
        i += len(ep)
    return out
