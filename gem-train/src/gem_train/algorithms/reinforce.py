"""REINFORCE: every turn is credited with its own discounted Monte-Carlo return, no baseline.

>>> discounted_returns([0.0, 0.0, 1.0], gamma=0.5)
[0.25, 0.5, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gem_train.algorithms.base import Algorithm

if TYPE_CHECKING:
    from gem_train.rollout import Episode


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Return of each turn of one episode: ``G_t = sum_k gamma^k r_{t+k}``.

    rewards: (T,) one per turn -> (T,) returns.
    """
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def reinforce_advantages(rewards: Sequence[Sequence[float]], gamma: float) -> list[list[float]]:
    """Raw per-turn returns of every episode (same nesting as ``rewards``).

    >>> reinforce_advantages([[0.0, 1.0], [0.0]], gamma=1.0)
    [[1.0, 1.0], [0.0]]
    """
    return [discounted_returns(r, gamma) for r in rewards]


class REINFORCE(Algorithm):
    """Raw discounted per-turn returns, no baseline."""

    name = "reinforce"

    def advantages(self, episodes: Sequence[Episode]) -> list[list[float]]:
        return reinforce_advantages([ep.rewards for ep in episodes], self.cfg.gamma)
