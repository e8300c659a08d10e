"""GRPO and RLOO: an episode's return compared with the other episodes of its group.

A group is the M episodes played from one initial state (the same reset seed). Every turn
of an episode gets the episode's advantage.

>>> grpo_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), normalize_std=False).tolist()
[0.5, -0.5]
>>> rloo_advantages(torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0, 0, 0])).tolist()
[1.0, -0.5, -0.5]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from gem_train.algorithms.base import Algorithm

if TYPE_CHECKING:
    from gem_train.rollout import Episode

EPS = 1e-6


def grpo_advantages(episode_returns: torch.Tensor, groups: torch.Tensor, normalize_std: bool = True) -> torch.Tensor:
    """Each episode's return less its group's mean, divided by the group's std (Dr.GRPO: ``normalize_std=False``).

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


def rloo_advantages(episode_returns: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """REINFORCE leave-one-out: each return less the mean of the *other* returns of its group.

    episode_returns: (E,), groups: (E,) -> (E,). Equals ``M/(M-1)`` times the group-centred
    return; a group of one has no baseline and gets advantage 0.
    """
    out = torch.zeros_like(episode_returns)
    for g in torch.unique(groups):
        idx = groups == g
        values = episode_returns[idx]
        m = values.numel()
        if m > 1:
            out[idx] = values - (values.sum() - values) / (m - 1)
    return out


def group_turn_advantages(rewards: Sequence[Sequence[float]], groups: Sequence[int], estimator: str,
                          normalize_std: bool = True) -> list[list[float]]:
    """``grpo`` or ``rloo`` advantages of each episode's undiscounted return, given to every turn.

    >>> group_turn_advantages([[0.0, 1.0], [0.0]], [0, 0], "rloo")
    [[1.0, 1.0], [-1.0]]
    """
    totals = torch.tensor([float(sum(r)) for r in rewards], dtype=torch.float64)
    ids = torch.tensor(list(groups))
    if estimator == "grpo":
        adv = grpo_advantages(totals, ids, normalize_std)
    elif estimator == "rloo":
        adv = rloo_advantages(totals, ids)
    else:
        raise ValueError(f"unknown group estimator {estimator!r}")
    return [[a] * len(r) for a, r in zip(adv.tolist(), rewards)]


class GRPO(Algorithm):
    """An episode's return normalised within its group (the episodes sharing its reset seed). The return is
    undiscounted: ``algo.gamma`` must be 1."""

    name = "grpo"
    grouped = True
    discounts = False

    def advantages(self, episodes: Sequence[Episode]) -> list[list[float]]:
        return group_turn_advantages([ep.rewards for ep in episodes], [ep.group for ep in episodes],
                                     self.name, self.cfg.normalize_std)


class RLOO(GRPO):
    """An episode's return less the mean of the other episodes of its group."""

    name = "rloo"
