"""The HF engines' KV cache layer: a decode step writes its position into spare room instead of copying the cache.

transformers' ``DynamicLayer`` grows by ``torch.cat`` at every decode step, so each step copies every layer's whole
cache to add one position: as many bytes as attention reads, at 1.7B, 128 requests and 1,280-token turns about
18 GiB written a step. A :class:`GrowingLayer` keeps its keys and values as views of buffers with room for
``KV_ROOM`` (:mod:`gem_train.engines.base`) more positions; a step writes its position into the room, and only a
full buffer is copied (into a larger one). The continuous engine's rows leave and join with one copy of the cache
(:meth:`GrowingLayer.keep`, :meth:`GrowingLayer.stack`), into buffers with room again; whatever else replaces
``keys`` or ``values`` (transformers' ``crop`` or ``reorder_cache``) is taken up at the next update, with one
copy, as the concatenation would have made.

>>> cache = model(input_ids=ids, use_cache=True).past_key_values    # doctest: +SKIP
>>> grow(cache)                                                     # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import torch

from gem_train.engines.base import KV_ROOM

try:
    from transformers.cache_utils import DynamicLayer
except ImportError:  # transformers < 4.54 keeps no cache layers: grow() leaves its caches as they are

    class DynamicLayer:  # type: ignore[no-redef]  # a stand-in no cache holds
        pass


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer whose ``keys``/``values`` (batch, heads, positions, head dim) are views of the
    first positions of larger buffers."""

    #: (the keys and values views handed out last, the buffers behind them); None until the first update
    _held: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        held, add = self._held, key_states.shape[-2]
        if self.keys is None or self.keys.numel() == 0:  # empty (transformers < 5 has no is_initialized)
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
        self._hold(key_buffer, value_buffer, n + add)
        return self.keys, self.values

    def _move_into_room(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """New buffers for ``length`` positions and KV_ROOM more, holding ``keys``/``values`` at their start."""
        n = keys.shape[-2]
        key_buffer = keys.new_empty(*keys.shape[:2], length + KV_ROOM, keys.shape[-1])
        value_buffer = values.new_empty(*values.shape[:2], length + KV_ROOM, values.shape[-1])
        key_buffer[:, :, :n] = keys
        value_buffer[:, :, :n] = values
        self._hold(key_buffer, value_buffer, n)

    def keep(self, rows: torch.Tensor, start: int) -> None:
        """Only ``rows`` (batch indices, in that order), from position ``start`` on: one copy, into new buffers with
        room (the continuous engine's rows that finished leave; columns that are padding in every row left go)."""
        n = self.keys.shape[-2] - start
        held: list[torch.Tensor] = []
        for cached in (self.keys, self.values):
            buffer = cached.new_empty(len(rows), cached.shape[1], n + KV_ROOM, cached.shape[-1])
            view = buffer[:, :, :n]
            torch.index_select(cached[:, :, start:], 0, rows, out=view)
            if view.data_ptr() != buffer.data_ptr():  # a backend that gave ``out`` storage of its own: copy it in
                buffer[:, :, :n] = view
            held.append(buffer)
        self._hold(*held, n)

    def stack(self, other: GrowingLayer, width: int) -> None:
        """This layer's rows, then ``other``'s, each left-padded with zeros to ``width`` positions: one copy of each,
        into new buffers with room (requests joining the continuous engine's running batch)."""
        held: list[torch.Tensor] = []
        for mine, theirs in ((self.keys, other.keys), (self.values, other.values)):
            buffer = mine.new_empty(len(mine) + len(theirs), mine.shape[1], width + KV_ROOM, mine.shape[-1])
            for rows, cached in ((slice(0, len(mine)), mine), (slice(len(mine), None), theirs)):
                pad = width - cached.shape[-2]
                buffer[rows, :, :pad] = 0
                buffer[rows, :, pad:width] = cached
            held.append(buffer)
        self._hold(*held, width)

    def _hold(self, key_buffer: torch.Tensor, value_buffer: torch.Tensor, n: int) -> None:
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
