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

from gem_train.algorithms.grpo import group_turn_advantages
from gem_train.algorithms.ppo import gae_turn_advantages
from gem_train.algorithms.rebn import Moments, normalise_turns, rebn_turn_advantages
from gem_train.algorithms.reinforce import discounted_returns, reinforce_advantages

ESTIMATORS = ("rebn", "grpo", "rloo", "reinforce", "ppo")
# estimators whose advantage compares episodes of one initial state: they need algo.group_size >= 2
GROUPED = ("grpo", "rloo")


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
    if estimator in GROUPED:
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
    raise ValueError(f"unknown advantage estimator {estimator!r}: one of {', '.join(ESTIMATORS)}")


def whiten(nested: Sequence[Sequence[float]], reduce: Callable[[Moments], Moments] | None = None
           ) -> list[list[float]]:
    """Every value less the batch mean, over the batch std (the batch's moments, reduced if asked)."""
    return normalise_turns(nested, True, reduce)


__all__ = ["ESTIMATORS", "GROUPED", "discounted_returns", "turn_advantages", "whiten"]
