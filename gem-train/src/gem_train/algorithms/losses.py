"""Policy-gradient losses on token log-probabilities.

Shapes: B turns in a micro-batch, T response positions (padded), V vocabulary.
The loss functions return a token *sum*; the caller divides by one normaliser for the
whole optimiser step (:func:`loss_normaliser`) so that gradient accumulation over
micro-batches gives the same gradient as one large batch.

>>> lp = torch.tensor([[-1.0, -2.0]]); mask = torch.ones(1, 2)
>>> policy_loss_sum(lp, lp, torch.tensor([1.0]), mask, "reinforce")[0].item()
3.0
"""

from __future__ import annotations

import torch


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probability of each target token under ``softmax(logits / temperature)``.

    logits: (B, T, V), targets: (B, T) -> (B, T). The temperature matches the sampler's,
    whose logprobs are those of the temperature-scaled distribution.
    """
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of each position's distribution: (B, T, V) -> (B, T)."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def policy_loss_sum(
    logprobs: torch.Tensor,
    sampler_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    kind: str,
    clip_eps: float = 0.2,
    tis_cap: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-sum of the policy loss and diagnostics.

    logprobs: (B, T) learner log-probs (with grad); sampler_logprobs: (B, T) the
    sampler's; advantages: (B,) one per turn; mask: (B, T) 1 on response tokens.

    - ``reinforce``: ``-A * log pi``, times ``min(pi/mu, tis_cap)`` (no gradient through
      the weight) when ``tis_cap`` is set: truncated importance sampling against the
      sampler ``mu``.
    - ``ppo_clip``: ``-min(rho * A, clip(rho, 1-eps, 1+eps) * A)`` with ``rho = pi/mu``.
    """
    adv = advantages.unsqueeze(-1)  # (B, 1)
    log_ratio = (logprobs - sampler_logprobs) * mask  # (B, T)
    ratio = log_ratio.exp()
    if kind == "reinforce":
        weight = ratio.detach().clamp(max=tis_cap) if tis_cap is not None else torch.ones_like(ratio)
        per_token = -adv * logprobs * weight
        clipped = torch.zeros_like(ratio)
    elif kind == "ppo_clip":
        unclipped = ratio * adv
        clipped_obj = ratio.clamp(1.0 - clip_eps, 1.0 + clip_eps) * adv
        per_token = -torch.minimum(unclipped, clipped_obj)
        clipped = (clipped_obj < unclipped).float()
    else:
        raise ValueError(f"unknown policy loss {kind!r}")
    with torch.no_grad():
        n = mask.sum().clamp(min=1)
        lr = log_ratio.detach()
        stats = {
            "ratio_mean": float((ratio.detach() * mask).sum() / n),
            # k3 estimator of KL(mu || pi) (Schulman): non-negative, low variance
            "kl_sampler": float(((lr.exp() - 1 - lr) * mask).sum() / n),
            "clip_frac": float((clipped * mask).sum() / n),
        }
    return (per_token * mask).sum(), stats


def loss_normaliser(kind: str, num_turns: int, num_tokens: int, constant: float) -> float:
    """Divisor of the token-sum loss of one optimiser step.

    ``constant``: turns x ``constant`` (Dr.GRPO: no length bias); ``length``: the
    number of response tokens.
    """
    if kind == "constant":
        return max(num_turns, 1) * constant
    if kind == "length":
        return float(max(num_tokens, 1))
    raise ValueError(f"unknown loss normalisation {kind!r}")
