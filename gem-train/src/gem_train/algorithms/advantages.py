"""One entry point for every advantage estimator: ``algo.name`` picks the module.

A batch is a flat list of turns from many episodes. Every token of a turn's response
gets that turn's advantage, so everything here works on one number per turn (or per
episode, for the group estimators).

- ``reinforce`` (:mod:`.reinforce`): raw discounted per-turn returns.
- ``rebn`` (:mod:`.rebn`): those returns normalised over the batch's turns.
- ``grpo`` / ``rloo`` (:mod:`.grpo`): the episode return against its group's.
- ``ppo`` (:mod:`.ppo`): GAE over turns from the critic's values.

>>> turn_advantages([[0.0, 1.0], [0.0]], [0, 1], "reinforce", gamma=1.0)
[[1.0, 1.0], [0.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gem_train.algorithms.grpo import group_turn_advantages
from gem_train.algorithms.ppo import gae_turn_advantages
from gem_train.algorithms.rebn import Moments, rebn_turn_advantages, whiten
from gem_train.algorithms.reinforce import discounted_returns, reinforce_advantages


def __getattr__(name: str) -> Any:
    """``ESTIMATORS`` and ``GROUPED``, read from the one registry (:mod:`.registry`), not kept here."""
    if name in ("ESTIMATORS", "GROUPED"):
        from gem_train.algorithms.registry import ALGORITHMS

        return tuple(n for n, cls in ALGORITHMS.items() if name == "ESTIMATORS" or cls.grouped)
    raise AttributeError(name)


def turn_advantages(
    rewards: Sequence[Sequence[float]],
    groups: Sequence[int],
    estimator: str,
    gamma: float,
    normalize_std: bool = True,
    *,
    values: Sequence[Sequence[float]] | None = None,
    lam: float = 1.0,
    last_values: Sequence[float] | None = None,
    reduce: Callable[[Moments], Moments] | None = None,
) -> list[list[float]]:
    """Advantages of every turn of every episode (same nesting as ``rewards``).

    ``values`` (the critic's, nested like ``rewards``), ``lam`` and ``last_values`` (per episode,
    the value after its last turn; see :func:`.ppo.gae_turn_advantages`) are for ``ppo``, whose
    advantages are whitened over the batch when ``normalize_std``. ``reduce`` turns this
    batch's moments into the global batch's when the batch is one rank's share (rebn, ppo).
    """
    if estimator in ("grpo", "rloo"):
        return group_turn_advantages(rewards, groups, estimator, normalize_std)
    if estimator == "reinforce":
        return reinforce_advantages(rewards, gamma)
    if estimator == "rebn":
        return rebn_turn_advantages(rewards, gamma, normalize_std, reduce)
    if estimator == "ppo":
        if values is None:
            raise ValueError("ppo advantages need the critic's values of every turn")
        adv, _ = gae_turn_advantages(rewards, values, gamma, lam, last_values)
        return whiten(adv, reduce) if normalize_std else adv
    from gem_train.algorithms.registry import ALGORITHMS

    raise ValueError(f"unknown advantage estimator {estimator!r}: one of {', '.join(ALGORITHMS)}")


__all__ = ["discounted_returns", "turn_advantages", "whiten"]  # and ESTIMATORS, GROUPED (module __getattr__)
