"""Turn-level credit in frameworks that train one token sequence per episode (verl, SkyRL).

Such a framework sees an episode as one response whose ``response_mask`` is 1 on the
tokens the policy sampled and 0 on the env's observations between them. The runs of 1s
are the episode's turns; each turn's reward sits on its last sampled token (the adapters
put it there). From those two tensors this module computes what gem-train's ReBN computes
from its per-turn episodes (``gem_train.algorithms.rebn``): every turn's discounted return
``G_t = r_t + gamma * G_{t+1}``, normalised over every turn of the batch (mean, and unbiased
standard deviation plus 1e-6), given to each token of that turn. Pure torch, so each
framework's estimator registry can call it.

>>> import torch
>>> mask = torch.tensor([[1, 1, 0, 1], [1, 0, 0, 0]])
>>> rewards = torch.tensor([[0.0, 0.5, 0.0, 1.0], [2.0, 0.0, 0.0, 0.0]])
>>> turn_spans(mask[0].tolist())
[(0, 2), (3, 4)]
>>> turn_rewards(rewards[0], [(0, 2), (3, 4)])
[0.5, 1.0]
>>> turn_rewards([0.0, 0.0], [])  # a padding row has no turn
[]
>>> rebn_token_advantages(rewards, mask, gamma=1.0, normalize_std=False).tolist()
[[0.0, 0.0, 0.0, -0.5], [0.5, 0.0, 0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: added to the batch's standard deviation, as gem-train's ReBN does
EPS = 1e-6


def turn_spans(mask: Sequence[int]) -> list[tuple[int, int]]:
    """``[start, end)`` of every run of 1s in one response mask (the episode's sampled turns)."""
    spans, start = [], None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(mask)))
    return spans


def turn_rewards(token_rewards: Any, spans: Sequence[tuple[int, int]]) -> list[float]:
    """One reward per turn: the sum of the token rewards from the turn's first token up to the
    next turn's first token (so a reward an adapter put on the turn's last token, or on the
    observation tokens after it, counts for that turn)."""
    row = [float(x) for x in token_rewards]
    if not spans:  # a padding row, or an episode the model sampled nothing in: no turn
        return []
    bounds = [s for s, _ in spans[1:]] + [len(row)]
    return [sum(row[start:stop]) for (start, _), stop in zip(spans, bounds, strict=True)]


def discounted(rewards: Sequence[float], gamma: float) -> list[float]:
    """``G_t = sum_k gamma^k r_{t+k}`` for each turn of one episode.

    >>> discounted([0.0, 0.0, 1.0], 0.5)
    [0.25, 0.5, 1.0]
    """
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = running
    return out


def rebn_turn_values(returns: Sequence[Sequence[float]], normalize_std: bool = True) -> list[list[float]]:
    """Every turn's return less the batch mean (over the batch's unbiased std + EPS), nested as given.

    >>> [[round(v, 4) for v in ep] for ep in rebn_turn_values([[1.0], [3.0]])]
    [[-0.7071], [0.7071]]
    """
    flat = [g for episode in returns for g in episode]
    n = len(flat)
    mean = sum(flat) / n if n else 0.0
    std = (sum((g - mean) ** 2 for g in flat) / (n - 1)) ** 0.5 if n > 1 else 0.0
    scale = 1.0 / (std + EPS) if normalize_std and n > 1 else 1.0
    return [[(g - mean) * scale for g in episode] for episode in returns]


def rebn_token_advantages(token_level_rewards: Any, response_mask: Any, gamma: float,
                          normalize_std: bool = True) -> Any:
    """(B, T) ReBN advantages: each sampled token carries its turn's normalised discounted return,
    every masked token 0. ``token_level_rewards`` and ``response_mask`` are (B, T) tensors."""
    import torch

    masks = response_mask.detach().cpu().tolist()
    rewards = token_level_rewards.detach().double().cpu()
    spans = [turn_spans(m) for m in masks]
    returns = [discounted(turn_rewards(rewards[b], spans[b]), gamma) for b in range(len(masks))]
    values = rebn_turn_values(returns, normalize_std)
    out = torch.zeros(rewards.shape, dtype=torch.float64)
    for b, episode in enumerate(spans):
        for (start, end), value in zip(episode, values[b], strict=True):
            out[b, start:end] = value
    return out.to(device=token_level_rewards.device, dtype=token_level_rewards.dtype)


__all__ = ["EPS", "discounted", "rebn_token_advantages", "rebn_turn_values", "turn_rewards", "turn_spans"]
