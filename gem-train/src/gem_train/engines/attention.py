"""The HF engines' attention: a decode step reads each key/value head once, whatever the query heads sharing it.

With grouped-query attention (Qwen3-1.7B: 16 query heads on 8 key/value heads) and an attention mask, which
left-padded batches always pass, transformers' ``sdpa`` attention repeats every key/value head for each query head
of its group (``repeat_kv``) before calling ``scaled_dot_product_attention``: a copy of the layer's whole KV cache,
``groups`` times over, at every decode step (SDPA's own ``enable_gqa`` it uses only without a mask, because on CUDA a
mask sends it to the slow math kernel). In a decode step each row has one query position, so the query heads of one
group can instead stand as that many query positions of their key/value head: ``(batch, kv_heads * groups, 1, dim)``
is viewed as ``(batch, kv_heads, groups, dim)`` and attends to the cache as it is, with the row's mask broadcast over
the group. The same sums, no copy of the cache, and SDPA's usual kernels with a mask.

:func:`use_grouped_decode` switches a model to it (registered with transformers as ``gem_sdpa``); every call that is
not a plain decode step (a prompt pass, the learner's passes, attention biases, sinks, a paged cache) goes to
transformers' ``sdpa`` unchanged. Where transformers lacks the attention and mask registries (before 4.53) or the
model does not use ``sdpa``, the model is left as it is.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

#: the name the attention is registered under with transformers
NAME = "gem_sdpa"

#: keyword arguments that mean more than plain scaled dot-product attention; with any of them set (not None or
#: False: transformers 4.53 passes ``output_attentions=False`` at every call), transformers' ``sdpa`` does the work
_SPECIAL = ("position_bias", "cache", "s_aux", "sinks", "output_attentions")


def grouped_decode_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor | None, dropout: float = 0.0,
                             scaling: float | None = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: ``query`` (batch, heads, positions, dim), ``key``/``value`` (batch,
    kv_heads, keys, dim) -> (batch, positions, heads, dim), no weights."""
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, positions, dim = query.shape
    per_row = attention_mask is None or (attention_mask.dim() == 4 and attention_mask.shape[1:3] == (1, 1))
    special = any(kwargs.get(name) is not None and kwargs.get(name) is not False for name in _SPECIAL)
    if positions != 1 or groups == 1 or dropout or special or heads != key.shape[1] * groups or not per_row:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    kv_heads, keys = key.shape[1], key.shape[-2]
    if attention_mask is not None:  # (batch or 1, 1, 1, >= keys): the row's mask, the same for its whole group
        # (a mask of its own per head, or one that is not 4-D, went to transformers' sdpa above)
        attention_mask = attention_mask[:, :, :, :keys].expand(attention_mask.shape[0], 1, groups, keys)
    out = torch.nn.functional.scaled_dot_product_attention(
        query.reshape(batch, kv_heads, groups, dim), key, value, attn_mask=attention_mask, scale=scaling)
    return out.reshape(batch, 1, heads, dim), None


def use_grouped_decode(model: Any) -> bool:
    """Switch ``model`` from transformers' ``sdpa`` attention to :func:`grouped_decode_attention`; whether it was."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    try:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:  # transformers < 4.53: no mask registry, the model keeps sdpa
        return False
    AttentionInterface.register(NAME, grouped_decode_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)  # the masks sdpa gets: a decode step's (batch, 1, 1, keys)
    if hasattr(model, "set_attn_implementation"):  # transformers >= 4.54; it declines (with a warning) for models
        model.set_attn_implementation(NAME)      # whose attention does not go through the registry
    elif getattr(model, "_supports_attention_backend", False):  # 4.53: such models' attention layers look the
        config._attn_implementation = NAME                       # name up in the config at every call
    return config._attn_implementation == NAME
