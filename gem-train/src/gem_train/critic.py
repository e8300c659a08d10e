"""PPO's turn-level critic: the value of the state a turn starts from.

A turn's state is its prompt, so the critic reads the hidden state of the prompt's last
token and maps it to one number with a linear head. The head sits either on the policy's
own backbone (``algo.critic=shared``: one forward pass gives logits and values) or on a
backbone of its own (``algo.critic=separate``: a copy of the policy's initial weights, or
the model in ``algo.critic_path``).

:class:`ActorCritic` is the one module the learner runs (and a distributed learner wraps):
``forward`` returns the policy's logits and, when there is a critic, the values.

>>> net = ActorCritic(policy, Critic.shared(policy))                      # doctest: +SKIP
>>> logits, values = net(input_ids, attention_mask, value_index)          # doctest: +SKIP
"""

from __future__ import annotations

import copy
from typing import Any

import torch


def _hidden_size(model: Any) -> int:
    config = model.config
    return int(getattr(config, "hidden_size", None) or config.get_text_config().hidden_size)


class Critic(torch.nn.Module):
    """A linear value head, with or without a backbone of its own."""

    def __init__(self, hidden_size: int, backbone: Any | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = torch.nn.Linear(hidden_size, 1)
        # V starts at 0 everywhere: the first GAE advantages are the plain discounted returns
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    @classmethod
    def shared(cls, policy: Any) -> Critic:
        """A head on the policy's backbone."""
        return cls(_hidden_size(policy)).to(next(policy.parameters()).device)

    @classmethod
    def separate(cls, policy: Any, path: str | None = None) -> Critic:
        """A head on its own backbone: the causal LM at ``path`` (same tokenizer as the policy), or a copy of
        the policy as it is now."""
        if path:
            from transformers import AutoModelForCausalLM

            backbone = AutoModelForCausalLM.from_pretrained(path, dtype=next(policy.parameters()).dtype)
        else:
            backbone = copy.deepcopy(policy)
        device = next(policy.parameters()).device
        return cls(_hidden_size(backbone), backbone.base_model).to(device)

    def values(self, hidden: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """hidden: (B, L, H) last hidden states, index: (B,) position of each prompt's last token -> (B,)."""
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        picked = hidden[rows, index.to(hidden.device)]
        return self.head(picked.to(self.head.weight.dtype)).squeeze(-1).float()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, index: torch.Tensor,
                hidden: torch.Tensor | None = None) -> torch.Tensor:
        """Values (B,) from the policy's ``hidden`` states (shared) or from the critic's own backbone."""
        if self.backbone is not None:
            hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        if hidden is None:
            raise ValueError("a shared critic reads the policy's hidden states: pass hidden=")
        return self.values(hidden, index)


class ActorCritic(torch.nn.Module):
    """The policy and (for PPO) its critic as one module.

    ``forward`` runs the policy's backbone once and computes full-vocabulary log-probabilities only at the
    positions ``mask`` marks (the trained response tokens), ``chunk`` positions at a time, each chunk's logits
    recomputed in the backward pass rather than kept: the logits of a long sequence (vocabulary x positions,
    about 6 MiB a token at Qwen3's 151,936 rows in fp32) never exist at once. It returns the targets'
    log-probabilities and the entropies, both (B, L-1) with zeros elsewhere, and the values (B,) or None.
    """

    def __init__(self, policy: Any, critic: Critic | None = None, chunk: int | None = None) -> None:
        super().__init__()
        self.policy, self.critic, self.chunk = policy, critic, chunk

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, targets: torch.Tensor,
                mask: torch.Tensor, temperature: float = 1.0, value_index: torch.Tensor | None = None,
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        if self.chunk is None:
            return self._whole(input_ids, attention_mask, targets, temperature, value_index)
        hidden = self.policy.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        picked = mask.bool()
        logprobs, entropies = chunked_logprobs(self.policy.get_output_embeddings(), hidden[:, :-1][picked],
                                               targets[picked], temperature, self.chunk)
        full_lp = hidden.new_zeros(mask.shape, dtype=torch.float32)
        full_ent = hidden.new_zeros(mask.shape, dtype=torch.float32)
        full_lp = full_lp.masked_scatter(picked, logprobs)
        full_ent = full_ent.masked_scatter(picked, entropies)
        if not picked.any():  # nothing trained here: a zero that still reaches every parameter (DDP joins)
            full_lp = full_lp + 0.0 * self.policy.get_output_embeddings()(hidden[:, :1]).sum()
        if self.critic is None or value_index is None:
            return full_lp, full_ent, None
        shared = hidden if self.critic.backbone is None else None
        return full_lp, full_ent, self.critic(input_ids, attention_mask, value_index, shared)

    def _whole(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, targets: torch.Tensor,
               temperature: float, value_index: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``chunk=None``: the full logits at every position in one pass (small models: the tiny scale's figures
        were measured so)."""
        from gem_train.algorithms.losses import entropy, token_logprobs

        shared = self.critic is not None and value_index is not None and self.critic.backbone is None
        out = self.policy(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=shared)
        logits = out.logits[:, :-1]
        logprobs, entropies = token_logprobs(logits, targets, temperature), entropy(logits.detach(), temperature)
        if self.critic is None or value_index is None:
            return logprobs, entropies, None
        hidden = out.hidden_states[-1] if shared else None
        return logprobs, entropies, self.critic(input_ids, attention_mask, value_index, hidden)


def chunked_logprobs(head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float,
                     chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each target (N,) and the entropy at each position (N,) from hidden states (N, H),
    ``chunk`` positions at a time; each chunk's logits are recomputed in the backward pass (checkpointed)."""
    from torch.utils.checkpoint import checkpoint

    def one(h: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logp = torch.log_softmax(head(h).float() / temperature, dim=-1)
        entropy = -(logp.exp() * logp).sum(-1)
        return logp.gather(-1, t.unsqueeze(-1)).squeeze(-1), entropy.detach()

    parts = [checkpoint(one, hidden[i:i + chunk], targets[i:i + chunk], use_reentrant=False)
             if torch.is_grad_enabled() else one(hidden[i:i + chunk], targets[i:i + chunk])
             for i in range(0, hidden.shape[0], chunk)]
    if not parts:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def make_critic(policy: Any, kind: str, path: str | None = None) -> Critic:
    """``shared`` or ``separate`` (see the module docstring)."""
    if kind == "shared":
        return Critic.shared(policy)
    if kind == "separate":
        return Critic.separate(policy, path)
    raise ValueError(f"unknown critic {kind!r}: shared or separate")
