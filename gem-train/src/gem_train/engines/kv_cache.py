"""The HF engines' KV cache layer: a decode step writes its position into spare room instead of copying the cache.

transformers' ``DynamicLayer`` grows by ``torch.cat`` at every decode step, so each step copies every layer's whole
cache to add one position: as many bytes as attention reads, at 1.7B, 128 requests and 1,280-token turns about
18 GiB written a step. A :class:`GrowingLayer` keeps its keys and values as views of buffers with room for
``KV_ROOM`` (:mod:`gem_train.engines.base`) more positions; a step writes its position into the room, and only a
full buffer is copied (into a larger one). The continuous engine's rows leave and join without a copy of the rows
that stay (:meth:`GrowingLayer.keep`, :meth:`GrowingLayer.stack`): the views narrow to the rows and columns kept, a
row that leaves makes room for the last row (the only one copied), and rows that join are written into the rows and
columns left free; only where none are free is the cache copied, once, into buffers with room again. Whatever else
replaces ``keys`` or ``values`` (transformers' ``crop`` or ``reorder_cache``) is taken up at the next update, with
one copy, as the concatenation would have made.

>>> cache = model(input_ids=ids, use_cache=True).past_key_values    # doctest: +SKIP
>>> grow(cache)                                                     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from gem_train.engines.base import KV_ROOM

try:
    from transformers.cache_utils import DynamicLayer
except ImportError:  # transformers < 4.54 keeps no cache layers: grow() leaves its caches as they are

    class DynamicLayer:  # type: ignore[no-redef]  # a stand-in no cache holds
        pass


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer whose ``keys``/``values`` (batch, heads, positions, head dim) are views of a block
    of larger buffers: their first rows, from a column on."""

    #: (the keys and values views handed out last, the buffers behind them, the views' first column in them); None
    #: until the first update
    _held: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int] | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        add = key_states.shape[-2]
        if self.keys is None or self.keys.numel() == 0:  # empty (transformers < 5 has no is_initialized)
            self.dtype, self.device, self.is_initialized = key_states.dtype, key_states.device, True
            self._move_into_room(key_states, value_states, add)
            return self.keys, self.values
        rows, n = self.keys.shape[0], self.keys.shape[-2]
        held = self._own()
        if held is None or held[4] + n + add > held[2].shape[-2]:
            self._move_into_room(self.keys, self.values, n + add)
            held = self._held
        _, _, key_buffer, value_buffer, start = held
        key_buffer[:rows, :, start + n:start + n + add] = key_states
        value_buffer[:rows, :, start + n:start + n + add] = value_states
        self._hold(key_buffer, value_buffer, rows, start, n + add)
        return self.keys, self.values

    def _own(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int] | None:
        """What it holds, unless ``keys``/``values`` were replaced from outside since (transformers' ``crop`` or
        ``reorder_cache``): then None, and they are taken up with one copy."""
        held = self._held
        return held if held is not None and held[0] is self.keys and held[1] is self.values else None

    def _move_into_room(self, keys: torch.Tensor, values: torch.Tensor, length: int) -> None:
        """New buffers for ``length`` positions and KV_ROOM more, holding ``keys``/``values`` at their start; as many
        rows as the old buffers had (rows that left keep their place for rows that join), but no more spare rows than
        rows held (a batch that has drained to a few rows does not carry its peak's rows on)."""
        n = keys.shape[-2]
        held = self._own()
        capacity = min(len(held[2]), 2 * len(keys)) if held is not None else len(keys)
        key_buffer = keys.new_empty(capacity, keys.shape[1], length + KV_ROOM, keys.shape[-1])
        value_buffer = values.new_empty(capacity, values.shape[1], length + KV_ROOM, values.shape[-1])
        key_buffer[:len(keys), :, :n] = keys
        value_buffer[:len(values), :, :n] = values
        self._hold(key_buffer, value_buffer, len(keys), 0, n)

    def keep(self, rows: Sequence[int], start: int) -> None:
        """Only ``rows`` (batch indices; the ``i``-th of the result is row ``rows[i]``), from position ``start`` on
        (the continuous engine's rows that finished leave; columns that are padding in every row left go). In
        place: a row whose index changes is copied (only its positions from ``start`` on), the others stay where
        they are, and the views narrow to the rows and columns kept; the rows past them keep their place for rows
        that join (:meth:`stack`)."""
        if self._own() is None:
            self._move_into_room(self.keys, self.values, self.keys.shape[-2])
        _, _, key_buffer, value_buffer, first = self._held
        n = self.keys.shape[-2]
        moved = [(i, row) for i, row in enumerate(rows) if i != row]
        if moved:
            to = torch.tensor([i for i, _ in moved], device=key_buffer.device)
            come = torch.tensor([row for _, row in moved], device=key_buffer.device)
            columns = slice(first + start, first + n)
            for buffer in (key_buffer, value_buffer):
                # gathered first, then written: a row read is never one already overwritten
                buffer[to, :, columns] = buffer[come, :, columns]
        self._hold(key_buffer, value_buffer, len(rows), first + start, n - start)

    def stack(self, other: GrowingLayer, width: int) -> None:
        """This layer's rows, then ``other``'s, each left-padded with zeros to ``width`` positions (requests joining
        the continuous engine's running batch). Where the buffers have the rows to spare (left by rows that
        finished) and the columns before the views (left by padding that was dropped), ``other``'s rows are written
        into them and only the new padding is zeroed: the rows already there are not copied. Otherwise one copy of
        both, into new buffers with room."""
        rows, n, joining = self.keys.shape[0], self.keys.shape[-2], other.keys.shape[0]
        held = self._own()
        first = held[4] - (width - n) if held is not None else -1
        if held is None or first < 0 or rows + joining > len(held[2]):
            buffers = [mine.new_empty(rows + joining, mine.shape[1], width + KV_ROOM, mine.shape[-1])
                       for mine in (self.keys, self.values)]
            blocks = ((slice(0, rows), self.keys, self.values), (slice(rows, None), other.keys, other.values))
            first = 0
        else:
            buffers = list(held[2:4])
            # the rows already there gain zeros on their left only
            blocks = ((slice(0, rows), None, None), (slice(rows, rows + joining), other.keys, other.values))
        for buffer, index in zip(buffers, (1, 2)):
            for block in blocks:
                cached = block[index]
                length = n if cached is None else cached.shape[-2]
                pad = width - length
                buffer[block[0], :, first:first + pad] = 0
                if cached is not None:
                    buffer[block[0], :, first + pad:first + width] = cached
        self._hold(buffers[0], buffers[1], rows + joining, first, width)

    def _hold(self, key_buffer: torch.Tensor, value_buffer: torch.Tensor, rows: int, first: int, n: int) -> None:
        self.keys = key_buffer[:rows, :, first:first + n]
        self.values = value_buffer[:rows, :, first:first + n]
        self._held = (self.keys, self.values, key_buffer, value_buffer, first)

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
