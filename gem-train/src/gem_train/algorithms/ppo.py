"""PPO: generalised advantage estimation over turns from a learned critic, the clipped value loss, and the
:class:`PPO` algorithm that builds the critic (restored when resuming), values every turn and whitens GAE.
The critic model itself is :mod:`gem_train.critic`; the policy's loss choice is ``algo.loss`` (its YAML).

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

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from gem_train import distributed
from gem_train.algorithms.base import Algorithm, Batch, flat
from gem_train.algorithms.rebn import whiten

if TYPE_CHECKING:
    from gem_train.config import AlgoConfig
    from gem_train.critic import Critic
    from gem_train.rollout import Episode, TurnSample


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


class PPO(Algorithm):
    """GAE over turns from a learned critic, whitened over the (global) batch.

    ``policy`` is the model the critic shares a backbone with or copies (``algo.critic``);
    ``checkpoint`` restores the critic of a resumed run. ``encode`` turns an observation into
    prompt ids; with it, an episode a turn limit cut short is bootstrapped from the critic's value
    of its final observation (without it, or when that prompt is longer than ``max_model_len``, from 0).
    :meth:`~Algorithm.bind` gives it the learner whose forward pass values the turns.
    """

    name = "ppo"
    learns_critic = True

    def __init__(self, cfg: AlgoConfig, policy: Any = None, checkpoint: Path | None = None,
                 encode: Callable[[Any], list[int]] | None = None, max_model_len: int | None = None,
                 critic: Critic | None = None, **context: Any) -> None:
        super().__init__(cfg)
        if critic is None:
            from gem_train.checkpoint import load_critic
            from gem_train.critic import make_critic

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
        from gem_train.rollout import TurnSample

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
        flat_targets = flat(targets)
        all_values = flat(distributed.all_gather(flat_values))
        all_targets = flat(distributed.all_gather(flat_targets))
        metrics = {"value_mean": sum(all_values) / max(len(all_values), 1),
                   "explained_variance": explained_variance(torch.tensor(all_values), torch.tensor(all_targets))}
        inputs = {"advantages": flat(advantages), "old_values": flat_values, "value_targets": flat_targets}
        return Batch(samples, inputs, metrics).first(keep)
