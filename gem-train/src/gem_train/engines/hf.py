"""A transformers engine: batched sampling with a KV cache, for machines without vLLM.

It keeps its own copy of the model, so weight sync works as it does with vLLM.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import torch

from gem_train.engines.base import Generation, Sampling, Weights, request_seeds, weight_pairs


def _top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Mask (set to -inf) the tokens outside the smallest set of mass >= top_p. (B, V) -> (B, V)."""
    if top_p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(-1)
    # a token is dropped when the mass before it already reaches top_p
    drop_sorted = probs.cumsum(-1) - probs >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def _draw(probs: torch.Tensor, generators: Sequence[torch.Generator]) -> torch.Tensor:
    """``torch.multinomial(probs[i], 1, generator=generators[i])`` for every row at once: the same tokens. For one
    sample torch draws ``q ~ Exp(1)`` per entry from the generator and takes ``argmax(p / q)``; here each row's ``q``
    comes from its own generator and the division and argmax run once for the batch, without multinomial's checks
    of each row (on a GPU, two device syncs per row: 256 a step at 128 requests). (B, V) -> (B,)."""
    q = torch.empty_like(probs)
    for row, generator in zip(q, generators):
        row.exponential_(1, generator=generator)
    return (probs / q).argmax(-1)


#: what torch.multinomial refused: a row of nan/inf probabilities, or none above zero
NAN_MESSAGE = "the model's next-token probabilities hold nan or inf, or are all zero"


def _drawable(logprob: float) -> bool:
    return not (math.isnan(logprob) or logprob == float("-inf"))


def sample(logits: torch.Tensor, sampling: Sampling,
           generators: Sequence[torch.Generator]) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's next token under ``sampling`` (temperature, top-p; greedy at temperature 0), row ``i`` drawn
    with ``generators[i]``, and its logprob under the distribution it was drawn from. (B, V) -> (B,), (B,)."""
    logits = logits.float()
    if sampling.temperature > 0:
        logits = _top_p_filter(logits / sampling.temperature, sampling.top_p)
        logp = torch.log_softmax(logits, -1)
        nxt = _draw(logp.exp(), generators)
    else:
        logp = torch.log_softmax(logits, -1)
        nxt = logits.argmax(-1)
    return nxt, logp.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)


class HFEngine:
    """Sampling with ``transformers`` (any HF causal LM), one batch at a time."""

    def __init__(self, model_path: str, dtype: str = "float32", device: str = "cpu", **_: Any) -> None:
        from gem_train.model import load_policy

        self.model, self.tokenizer = load_policy(model_path, dtype=dtype, device=device)
        self.model.eval()
        from gem_train.engines.attention import use_grouped_decode

        # grouped-query attention without repeating the KV cache per query head at every decode step
        use_grouped_decode(self.model)
        self.device = device
        from gem_train.tokenizer import turn_end_ids

        self.eos_id = self.tokenizer.eos_token_id
        #: what ends a turn: the eos and the chat template's end-of-turn token
        self.stop_ids = turn_end_ids(self.tokenizer) or [self.eos_id]
        self.pad_id = self.tokenizer.pad_token_id
        # newer transformers (5.24, not 5.19) call the KV cache ``cache`` (argument and output) and warn on the old name
        parameters = inspect.signature(self.model.forward).parameters
        self.cache_name = "cache" if "cache" in parameters else "past_key_values"
        # the prompt's pass needs the last position's logits only: not (requests x prompt x vocabulary) of them
        # (at Qwen3's 151,936 rows and 128 prompts of 200 tokens, 7.8 GB in bf16)
        self.last_logits = {"logits_to_keep": 1} if "logits_to_keep" in parameters else {}

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], sampling: Sampling, seeds: Sequence[int] | None = None
    ) -> list[Generation]:
        if not prompts:
            return []
        gens = self.generators(request_seeds(len(prompts), sampling, seeds))
        past, mask, next_pos, logits = self.prefill(prompts)
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        done = torch.zeros(len(prompts), dtype=torch.bool, device=self.device)
        live = list(range(len(prompts)))
        stops = torch.tensor(self.stop_ids, device=self.device)
        for _ in range(sampling.max_tokens):
            nxt, chosen = sample(logits, sampling, gens)
            # one copy to the host per step, not one per row and value (each a device sync on a GPU)
            step_tokens, step_logprobs = nxt.tolist(), chosen.tolist()
            if any(not _drawable(step_logprobs[i]) for i in live):
                raise RuntimeError(NAN_MESSAGE)
            for i in live:
                tokens[i].append(step_tokens[i])
                logprobs[i].append(step_logprobs[i])
            done |= torch.isin(nxt, stops)
            live = [i for i, finished in enumerate(done.tolist()) if not finished]
            if not live:
                break
            past, mask, logits = self.decode(past, mask, next_pos, nxt)
            next_pos = next_pos + 1
        return [
            Generation(t, lp, "stop" if t and t[-1] in self.stop_ids else "length")
            for t, lp in zip(tokens, logprobs)
        ]

    def generators(self, seeds: Sequence[int | None]) -> list[torch.Generator]:
        """One generator per request: its draws do not depend on which other requests share the batch."""
        gens = [torch.Generator(device=self.device) for _ in seeds]
        for g, seed in zip(gens, seeds):
            g.manual_seed(seed if seed is not None else torch.seed())
        return gens

    def prefill(self, prompts: list[list[int]]) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The prompts' pass, left-padded to the longest: the KV cache, the attention mask (1 on real tokens), each
        row's next position and its next-token logits."""
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **self.last_logits)
        from gem_train.engines.kv_cache import grow

        # decode steps write into spare room rather than concatenating (copying) each layer's whole cache
        return grow(getattr(out, self.cache_name)), mask, positions[:, -1] + 1, out.logits[:, -1]

    def decode(self, past: Any, mask: torch.Tensor, next_pos: torch.Tensor,
               nxt: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """One decode step of every row: token ``nxt`` at ``next_pos``; the cache, the mask and the logits after."""
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
        out = self.model(input_ids=nxt.unsqueeze(-1), attention_mask=mask, position_ids=next_pos.unsqueeze(-1),
                         use_cache=True, **{self.cache_name: past})
        return getattr(out, self.cache_name), mask, out.logits[:, -1]

    def load_weights(self, weights: Weights) -> None:
        # each tensor copied into place as it comes (and cast to the sampler's dtype), none kept; names the model
        # does not have are passed over, as load_state_dict(strict=False) would
        own = self.model.state_dict()
        with torch.no_grad():
            for name, tensor in weight_pairs(weights):
                if name in own:
                    own[name].copy_(tensor)

    def close(self) -> None:
        self.model = None
