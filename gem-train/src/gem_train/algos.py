"""One object per ``algo.name``: ``prepare(episodes)`` turns a batch of episodes into what the learner trains on.

Each algorithm lives in its own module of :mod:`gem_train.algorithms` (its maths beside its class) and the
one registry :mod:`gem_train.algorithms.registry` finds them; this module gathers the names the trainer
uses. :class:`PPO` also owns the critic: it builds it (restored from a checkpoint when resuming), values
every turn with it and computes GAE once, giving the learner the advantages, the old values and the
value targets.

Under torchrun every rank calls ``prepare`` together with its share of the episodes (a rank that
played none passes none): ReBN's and PPO's batch moments are all-reduced, so each rank normalises
by the global batch's; the group estimators need nothing from other ranks (a rank plays whole groups).

>>> from gem_train.config import AlgoConfig
>>> from gem_train.rollout import Episode, TurnSample
>>> turn = lambda reward: TurnSample([1], [2], [-0.5], "stop", reward)
>>> batch = make_algorithm(AlgoConfig(name="reinforce", gamma=1.0)).prepare(
...     [Episode(0, 0, [turn(0.0), turn(1.0)]), Episode(1, 1, [turn(0.5)])])
>>> batch.inputs["advantages"], len(batch.samples)
([1.0, 1.0, 0.5], 3)
"""

from __future__ import annotations

from gem_train.algorithms.base import Algorithm, Batch
from gem_train.algorithms.grpo import GRPO, RLOO
from gem_train.algorithms.ppo import PPO
from gem_train.algorithms.rebn import ReBN
from gem_train.algorithms.registry import ALGORITHMS, make_algorithm
from gem_train.algorithms.reinforce import REINFORCE

__all__ = ["ALGORITHMS", "GRPO", "PPO", "REINFORCE", "RLOO", "Algorithm", "Batch", "ReBN", "make_algorithm"]
