"""The HF engines' KV cache layer: a decode step writes its position into spare room instead of copying the cache.

transformers' ``DynamicLayer`` grows by ``torch.cat`` at every decode step, so each step copies every layer's whole
cache to add one position: as many bytes as attention reads, at 1.7B, 128 requests and 1,280-token turns about
18 GiB written a step. A :class:`GrowingLayer` keeps its keys and values as views of buffers with room for
``KV_ROOM`` (:mod:`gem_train.engines.base`) more positions; a step writes its position into the room, and only a
full buffer is copied (into a larger one). Whatever replaces ``keys`` or ``values`` from outside (the continuous
engine's row selection and admissions, transformers' ``crop`` or ``reorder_cache``) is taken up at the next
update, with one copy, as the concatenation would have made.

>>> cache = model(input_ids=ids, use_cache=True).past_key_values    # doctest: +SKIP
>>> grow(cache)                                                     # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicLayer

from gem_train.engines.base import KV_ROOM


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer whose ``keys``/``values`` (batch, heads, positions, head dim) are views of the
    first positions of larger buffers."""

    #: (the keys and values views handed out last, the buffers behind them); None until the first update
    _held: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        held, add = self._held, key_states.shape[-2]
        if not self.is_initialized or self.keys is None or self.keys.numel() == 0:
            self.dtype, self.device, self.is_initialized = key_states.dtype, key_states.device, True
            self._move_into_room(key_states, value_states, add)
            return self.keys, self.values
        n = self.keys.shape[-2]
        if held is None or held[0] is not self.keys or held[1] is not self.values or n + add > held[2].shape[-2]:
            self._move_into_room(self.keys, self.values, n + add)
            held = self._held
        _, _, key_buffer, value_buffer = held
        key_buffer[:, :, n:n + add] = key_states
        value_buffer[:, :, n:n + add] = value_states
        self.keys, self.values = key_buffer[:, :, :n + add], value_buffer[:, :, :n + add]
        self._held = (self.keys, self.values, key_buffer, value_buffer)
        return self.keys, self.values

    def _move_into_room(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """New buffers for ``length`` positions and KV_ROOM more, holding ``keys``/``values`` at their start."""
        n = keys.shape[-2]
        key_buffer = keys.new_empty(*keys.shape[:2], length + KV_ROOM, keys.shape[-1])
        value_buffer = values.new_empty(*values.shape[:2], length + KV_ROOM, values.shape[-1])
        key_buffer[:, :, :n] = keys
        value_buffer[:, :, :n] = values
        self.keys, self.values = key_buffer[:, :, :n], value_buffer[:, :, :n]
        self._held = (self.keys, self.values, key_buffer, value_buffer)

    def reset(self) -> None:
        self._held = None
        super().reset()


def grow(cache: Any) -> Any:
    """Make the full-attention layers of ``cache`` (a ``DynamicCache`` after the prompt's pass) grow into spare room.
    transformers builds the layers itself during that pass; their class is switched after it (the same attributes,
    only ``update`` differs). Other layers (sliding-window, quantized, static) stay as they are."""
    for layer in getattr(cache, "layers", ()):
        if type(layer) is DynamicLayer:
            layer.__class__ = GrowingLayer
    return cache
