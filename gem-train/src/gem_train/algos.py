"""One object per ``algo.name``: ``prepare(episodes)`` turns a batch of episodes into what the learner trains on.

The maths are the pure functions of :mod:`gem_train.algorithms`; an object here only feeds them the
batch and lays their per-turn results out beside the turns. :class:`PPO` also owns the critic: it
builds it (restored from a checkpoint when resuming), values every turn with it and computes GAE
once, giving the learner the advantages, the old values and the value targets.

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gem_train import distributed
from gem_train.algorithms.advantages import whiten
from gem_train.algorithms.grpo import group_turn_advantages
from gem_train.algorithms.ppo import explained_variance, gae_turn_advantages
from gem_train.algorithms.rebn import rebn_turn_advantages
from gem_train.algorithms.reinforce import reinforce_advantages
from gem_train.checkpoint import load_critic
from gem_train.config import AlgoConfig
from gem_train.critic import Critic, make_critic
from gem_train.learner import Learner
from gem_train.rollout import Episode, TurnSample


@dataclass
class Batch:
    """The turns the learner trains on, in episode order, and the lists :meth:`Learner.update` takes beside
    them (``advantages``; PPO adds ``old_values`` and ``value_targets``), one entry per turn."""

    samples: list[TurnSample]
    inputs: dict[str, list[float]]
    # what preparing the batch measured (PPO: value_mean, explained_variance), the global batch's
    metrics: dict[str, float] = field(default_factory=dict)

    def first(self, n: int | None) -> Batch:
        """The first ``n`` turns (None: all)."""
        if n is None:
            return self
        return Batch(self.samples[:n], {k: v[:n] for k, v in self.inputs.items()}, self.metrics)


def _flat(nested: Sequence[Sequence[float]]) -> list[float]:
    return [x for inner in nested for x in inner]


class Algorithm:
    """An advantage estimator; subclasses define :meth:`advantages`."""

    #: PPO's value model; the learner trains it beside the policy
    critic: Critic | None = None

    def __init__(self, cfg: AlgoConfig) -> None:
        self.cfg = cfg
        self.learner: Learner | None = None

    def bind(self, learner: Learner) -> Algorithm:
        """The learner the batches are for, built with this object's critic (PPO values turns with it)."""
        self.learner = learner
        return self

    def advantages(self, episodes: Sequence[Episode]) -> list[list[float]]:
        """One advantage per turn of every episode, nested like the episodes."""
        raise NotImplementedError

    def prepare(self, episodes: Sequence[Episode], keep: int | None = None) -> Batch:
        """The episodes' turns with their advantages; ``keep``: only the first that many turns are trained on
        (the statistics still see every turn)."""
        samples = [turn for ep in episodes for turn in ep.turns]
        return Batch(samples, {"advantages": _flat(self.advantages(episodes))}).first(keep)


class REINFORCE(Algorithm):
    """Raw discounted per-turn returns, no baseline."""

    def advantages(self, episodes: Sequence[Episode]) -> list[list[float]]:
        return reinforce_advantages([ep.rewards for ep in episodes], self.cfg.gamma)


class ReBN(Algorithm):
    """Discounted per-turn returns normalised over every turn of the (global) batch."""

    def advantages(self, episodes: Sequence[Episode]) -> list[list[float]]:
        return rebn_turn_advantages([ep.rewards for ep in episodes], self.cfg.gamma, self.cfg.normalize_std,
                                    distributed.all_reduce_moments)


class GRPO(Algorithm):
    """An episode's return normalised within its group (the episodes sharing its reset seed)."""

    estimator = "grpo"

    def advantages(self, episodes: Sequence[Episode]) -> list[list[float]]:
        return group_turn_advantages([ep.rewards for ep in episodes], [ep.group for ep in episodes],
                                     self.estimator, self.cfg.normalize_std)


class RLOO(GRPO):
    """An episode's return less the mean of the other episodes of its group."""

    estimator = "rloo"


class PPO(Algorithm):
    """GAE over turns from a learned critic, whitened over the (global) batch.

    ``policy`` is the model the critic shares a backbone with or copies (``algo.critic``);
    ``checkpoint`` restores the critic of a resumed run. ``encode`` turns an observation into
    prompt ids; with it, an episode a turn limit cut short is bootstrapped from the critic's value
    of its final observation (without it, or when that prompt is longer than ``max_model_len``, from 0).
    :meth:`~Algorithm.bind` gives it the learner whose forward pass values the turns.
    """

    def __init__(self, cfg: AlgoConfig, policy: Any = None, checkpoint: Path | None = None,
                 encode: Callable[[Any], list[int]] | None = None, max_model_len: int | None = None,
                 critic: Critic | None = None) -> None:
        super().__init__(cfg)
        if critic is None:
            critic = make_critic(policy, cfg.critic, cfg.critic_path)
            if checkpoint is not None:
                load_critic(checkpoint, critic)
        self.critic = critic
        self.encode, self.max_model_len = encode, max_model_len

    def _values(self, samples: Sequence[TurnSample]) -> list[float]:
        if self.learner is None:
            raise ValueError("PPO values turns with its learner: call bind(learner) first")
        return self.learner.values(samples)

    def _last_values(self, episodes: Sequence[Episode]) -> list[float]:
        """Per episode, V of the state after its last turn: its final observation's when a turn limit cut it
        short, else 0."""
        out = [0.0] * len(episodes)
        if self.encode is None:
            return out
        cut = {}
        for i, ep in enumerate(episodes):
            if ep.cut_short and ep.trajectory is not None and ep.trajectory.final_observation is not None:
                prompt = self.encode(ep.trajectory.final_observation)
                if 0 < len(prompt) <= (self.max_model_len or len(prompt)):
                    cut[i] = TurnSample(prompt, [], [], "stop")
        if cut:
            for i, value in zip(cut, self._values(list(cut.values()))):
                out[i] = value
        return out

    def prepare(self, episodes: Sequence[Episode], keep: int | None = None) -> Batch:
        samples = [turn for ep in episodes for turn in ep.turns]
        flat_values = self._values(samples)
        values, i = [], 0
        for ep in episodes:
            values.append(flat_values[i:i + len(ep.turns)])
            i += len(ep.turns)
        rewards = [ep.rewards for ep in episodes]
        advantages, targets = gae_turn_advantages(rewards, values, self.cfg.gamma, self.cfg.gae_lambda,
                                                  self._last_values(episodes))
        if self.cfg.normalize_std:
            advantages = whiten(advantages, distributed.all_reduce_moments)
        flat_targets = _flat(targets)
        all_values = _flat(distributed.all_gather(flat_values))
        all_targets = _flat(distributed.all_gather(flat_targets))
        metrics = {"value_mean": sum(all_values) / max(len(all_values), 1),
                   "explained_variance": explained_variance(torch.tensor(all_values), torch.tensor(all_targets))}
        inputs = {"advantages": _flat(advantages), "old_values": flat_values, "value_targets": flat_targets}
        return Batch(samples, inputs, metrics).first(keep)


#: algo.name -> its class
ALGORITHMS: dict[str, type[Algorithm]] = {"rebn": ReBN, "grpo": GRPO, "rloo": RLOO, "reinforce": REINFORCE,
                                          "ppo": PPO}


def make_algorithm(cfg: AlgoConfig, **ppo: Any) -> Algorithm:
    """The object of ``cfg.name``; ``ppo`` are :class:`PPO`'s arguments (policy, checkpoint, encode,
    max_model_len), ignored by the others."""
    if cfg.name not in ALGORITHMS:
        raise ValueError(f"unknown algo.name {cfg.name!r}: one of {', '.join(ALGORITHMS)}")
    cls = ALGORITHMS[cfg.name]
    return cls(cfg, **ppo) if cls is PPO else cls(cfg)
