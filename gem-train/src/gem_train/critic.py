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
    """The policy and (for PPO) its critic as one module: logits (B, L, V) and values (B,) or None."""

    def __init__(self, policy: Any, critic: Critic | None = None) -> None:
        super().__init__()
        self.policy, self.critic = policy, critic

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                value_index: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        shared = self.critic is not None and value_index is not None and self.critic.backbone is None
        out = self.policy(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=shared)
        if self.critic is None or value_index is None:
            return out.logits, None
        hidden = out.hidden_states[-1] if shared else None
        return out.logits, self.critic(input_ids, attention_mask, value_index, hidden)


def make_critic(policy: Any, kind: str, path: str | None = None) -> Critic:
    """``shared`` or ``separate`` (see the module docstring)."""
    if kind == "shared":
        return Critic.shared(policy)
    if kind == "separate":
        return Critic.separate(policy, path)
    raise ValueError(f"unknown critic {kind!r}: shared or separate")
