"""ReBN: per-turn discounted returns, normalised over every turn of the batch.

The batch statistics are kept as moments ``(count, sum, sum of squares)`` so that a
distributed learner can all-reduce them and every rank normalises by the statistics of
the global batch (:func:`gem_train.distributed.all_reduce_moments`).

>>> [round(a, 4) for a in rebn_advantages(torch.tensor([1.0, 3.0])).tolist()]
[-0.7071, 0.7071]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from gem_train import distributed
from gem_train.algorithms.base import Algorithm
from gem_train.algorithms.reinforce import discounted_returns

if TYPE_CHECKING:
    from gem_train.rollout import Episode

EPS = 1e-6

Moments = tuple[float, float, float]


def moments(values: torch.Tensor) -> Moments:
    """``(count, sum, sum of squares)`` of a (N,) tensor, in float64.

    >>> moments(torch.tensor([1.0, 2.0]))
    (2.0, 3.0, 5.0)
    """
    v = values.double()
    return float(v.numel()), float(v.sum()), float((v * v).sum())


def mean_std(m: Moments) -> tuple[float, float]:
    """Mean and unbiased standard deviation (as ``torch.std``) from moments; std 0 below two values.

    >>> mean_std((3.0, 6.0, 14.0))   # values 1, 2, 3
    (2.0, 1.0)
    """
    n, s, ss = m
    if n == 0:
        return 0.0, 0.0
    mean = s / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(max(ss - n * mean * mean, 0.0) / (n - 1))


def rebn_advantages(returns: torch.Tensor, normalize_std: bool = True, batch: Moments | None = None) -> torch.Tensor:
    """Returns normalised by the batch's mean (and standard deviation).

    returns: (N,) one return per turn -> (N,) advantages. ``batch``: moments of the whole
    batch when ``returns`` is one rank's share of it (default: the moments of ``returns``).
    """
    n, _, _ = batch = batch if batch is not None else moments(returns)
    mean, std = mean_std(batch)
    centred = returns - mean
    if not normalize_std or n < 2:
        return centred
    return centred / (std + EPS)


def normalise_turns(nested: Sequence[Sequence[float]], normalize_std: bool = True,
                    reduce: Callable[[Moments], Moments] | None = None) -> list[list[float]]:
    """Every value of every episode less the batch mean (and over the batch std), nested as given.

    ``reduce`` maps this batch's moments to the global batch's (an all-reduce across ranks); it
    is called even for an empty batch, so a rank with no turns still joins the collective.

    >>> normalise_turns([[1.0], [3.0]], normalize_std=False)
    [[-1.0], [1.0]]
    """
    flat = torch.tensor([x for ep in nested for x in ep], dtype=torch.float64)
    stats = moments(flat)
    if reduce is not None:
        stats = reduce(stats)
    normed = rebn_advantages(flat, normalize_std, stats).tolist() if flat.numel() else []
    out, i = [], 0
    for ep in nested:
        out.append(normed[i:i + len(ep)])
        i += len(ep)
    return out


def rebn_turn_advantages(rewards: Sequence[Sequence[float]], gamma: float, normalize_std: bool = True,
                         reduce: Callable[[Moments], Moments] | None = None) -> list[list[float]]:
    """ReBN advantages of every turn of every episode (same nesting as ``rewards``): their discounted returns
    through :func:`normalise_turns`."""
    return normalise_turns([discounted_returns(r, gamma) for r in rewards], normalize_std, reduce)


def whiten(nested: Sequence[Sequence[float]], reduce: Callable[[Moments], Moments] | None = None
           ) -> list[list[float]]:
    """Every value less the batch mean, over the batch std (the batch's moments, reduced if asked)."""
    return normalise_turns(nested, True, reduce)


class ReBN(Algorithm):
    """Discounted per-turn returns normalised over every turn of the (global) batch."""

    name = "rebn"

    def advantages(self, episodes: Sequence[Episode]) -> list[list[float]]:
        return rebn_turn_advantages([ep.rewards for ep in episodes], self.cfg.gamma, self.cfg.normalize_std,
                                    distributed.all_reduce_moments)
