"""PPO's critic side: generalised advantage estimation over turns and the clipped value loss.

The critic values the state a turn starts from (the prompt of the turn). An episode's
turns ``t = 0..T-1`` give temporal differences
``delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)`` with ``V(s_T) = 0`` when the episode
terminated, and the critic's value of the final observation when a turn limit cut it short,
and ``A_t = sum_k (gamma * lambda)^k delta_{t+k}``; the critic's target is ``A_t + V(s_t)``.

>>> adv, ret = gae([0.0, 1.0], [0.5, 0.5], gamma=1.0, lam=1.0)
>>> adv, ret      # lambda = 1: Monte-Carlo returns less the values
([0.5, 0.5], [1.0, 1.0])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def gae(rewards: Sequence[float], values: Sequence[float], gamma: float, lam: float, last_value: float = 0.0
        ) -> tuple[list[float], list[float]]:
    """Advantages and value targets (lambda-returns) of one episode's turns.

    rewards, values: (T,) -> advantages (T,), targets (T,). ``last_value``: V of the state after the last
    turn (0 when the episode terminated; a bootstrap for an episode cut short).
    """
    if len(rewards) != len(values):
        raise ValueError(f"{len(rewards)} rewards but {len(values)} values")
    adv = [0.0] * len(rewards)
    running, next_value = 0.0, float(last_value)
    for t in range(len(rewards) - 1, -1, -1):
        delta = float(rewards[t]) + gamma * next_value - float(values[t])
        running = delta + gamma * lam * running
        adv[t] = running
        next_value = float(values[t])
    return adv, [a + float(v) for a, v in zip(adv, values)]


def gae_turn_advantages(rewards: Sequence[Sequence[float]], values: Sequence[Sequence[float]], gamma: float,
                        lam: float, last_values: Sequence[float] | None = None
                        ) -> tuple[list[list[float]], list[list[float]]]:
    """:func:`gae` of every episode: (advantages, value targets), both nested like ``rewards``.

    ``last_values``: per episode, V of the state after its last turn (0 for an episode that
    terminated; the critic's value of the final observation for one cut short). Default all 0.

    >>> gae_turn_advantages([[1.0], [0.0, 0.0]], [[0.25], [0.5, 0.5]], gamma=0.5, lam=0.0)
    ([[0.75], [-0.25, -0.5]], [[1.0], [0.25, 0.0]])
    >>> gae_turn_advantages([[1.0]], [[0.25]], gamma=0.5, lam=0.0, last_values=[1.0])
    ([[1.25]], [[1.5]])
    """
    if len(rewards) != len(values):
        raise ValueError(f"{len(rewards)} episodes of rewards but {len(values)} of values")
    last = list(last_values) if last_values is not None else [0.0] * len(rewards)
    if len(last) != len(rewards):
        raise ValueError(f"{len(rewards)} episodes but {len(last)} last values")
    pairs = [gae(r, v, gamma, lam, b) for r, v, b in zip(rewards, values, last)]
    return [a for a, _ in pairs], [t for _, t in pairs]


def value_loss_sum(values: torch.Tensor, old_values: torch.Tensor, targets: torch.Tensor,
                   clip: float | None = None) -> torch.Tensor:
    """Sum over turns of ``0.5 * max((V - R)^2, (V_clipped - R)^2)``.

    values: (B,) the critic now (with grad); old_values: (B,) the critic when the batch was
    collected; targets: (B,) lambda-returns. ``V_clipped = old + clip(V - old, -clip, clip)``
    keeps one batch from moving the critic far (``clip=None``: the plain squared error).

    >>> value_loss_sum(torch.tensor([2.0]), torch.tensor([0.0]), torch.tensor([0.0]), clip=0.5).item()
    2.0
    """
    unclipped = (values - targets) ** 2
    if clip is None:
        return 0.5 * unclipped.sum()
    clipped_values = old_values + (values - old_values).clamp(-clip, clip)
    return 0.5 * torch.maximum(unclipped, (clipped_values - targets) ** 2).sum()


def explained_variance(predictions: torch.Tensor, targets: torch.Tensor) -> float:
    """``1 - Var(R - V) / Var(R)``: 1 for a perfect critic, 0 for one no better than the mean, NaN-free.

    >>> explained_variance(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]))
    1.0
    """
    var = float(targets.var()) if targets.numel() > 1 else 0.0
    if var == 0.0:
        return 0.0
    return 1.0 - float((targets - predictions).var()) / var
