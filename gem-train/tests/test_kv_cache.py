"""The HF engines' KV cache layer (gem_train.engines.kv_cache): decode steps write into spare room instead of
concatenating each layer's whole cache, and compute what transformers' own layer computes."""

from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.cache_utils import DynamicLayer

from gem_train.engines.base import KV_ROOM
from gem_train.engines.kv_cache import GrowingLayer, grow


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=1024)
    return Qwen3ForCausalLM(config).eval()


def _decode(model, growing: bool, steps: int) -> tuple[list[torch.Tensor], object]:
    """Greedy decoding of three left-padded prompts: each step's logits, and the cache after."""
    torch.manual_seed(1)
    ids = torch.randint(1, 97, (3, 6))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding in one row
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True)
        cache = grow(out.past_key_values) if growing else out.past_key_values
        logits, next_pos, seen = out.logits[:, -1], positions[:, -1] + 1, []
        for _ in range(steps):
            seen.append(logits)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], -1)
            out = model(input_ids=logits.argmax(-1, keepdim=True), attention_mask=mask,
                        position_ids=next_pos.unsqueeze(-1), past_key_values=cache, use_cache=True)
            cache, logits, next_pos = out.past_key_values, out.logits[:, -1], next_pos + 1
    return seen, cache


def test_decoding_into_spare_room_computes_what_concatenation_computes(model):
    """Past a full room (KV_ROOM + 20 steps), every step's logits equal transformers' own layer's."""
    plain, plain_cache = _decode(model, growing=False, steps=KV_ROOM + 20)
    grown, grown_cache = _decode(model, growing=True, steps=KV_ROOM + 20)
    assert all(type(layer) is GrowingLayer for layer in grown_cache.layers)
    assert all(type(layer) is DynamicLayer for layer in plain_cache.layers)
    for a, b in zip(plain, grown):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    for a, b in zip(plain_cache.layers, grown_cache.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_a_step_writes_into_the_room_and_copies_nothing():
    layer = GrowingLayer()
    k = torch.randn(2, 1, 5, 4)
    layer.update(k, k + 1)
    buffer = layer.keys.data_ptr()
    for step in range(KV_ROOM):
        keys, values = layer.update(torch.full((2, 1, 1, 4), float(step)), torch.zeros(2, 1, 1, 4))
        assert keys.data_ptr() == buffer and keys.shape[-2] == 5 + step + 1  # the same buffer, one more position
    assert torch.equal(layer.keys[:, :, :5], k) and torch.equal(layer.values[:, :, :5], k + 1)
    assert torch.equal(layer.keys[:, :, 5:, 0], torch.arange(KV_ROOM, dtype=torch.float32).expand(2, 1, KV_ROOM))
    layer.update(torch.ones(2, 1, 1, 4), torch.ones(2, 1, 1, 4))  # the room is full: one copy into a larger buffer
    assert layer.keys.data_ptr() != buffer and layer.keys.shape[-2] == 5 + KV_ROOM + 1
    assert torch.equal(layer.keys[:, :, :5], k)


def test_keys_replaced_from_outside_are_taken_up_at_the_next_update():
    """The continuous engine keeps some rows and trims padding columns by assigning keys and values (as
    transformers' crop and reorder_cache do): the next update continues from what was assigned."""
    layer = GrowingLayer()
    k = torch.randn(3, 1, 4, 2)
    layer.update(k, -k)
    layer.keys, layer.values = layer.keys[[2, 0]][:, :, 1:], layer.values[[2, 0]][:, :, 1:]
    new = torch.randn(2, 1, 1, 2)
    keys, values = layer.update(new, -new)
    assert torch.equal(keys, torch.cat([k[[2, 0]][:, :, 1:], new], dim=2))
    assert torch.equal(values, -keys)


def test_grow_leaves_layers_of_other_kinds_alone():
    from transformers.cache_utils import DynamicCache, DynamicSlidingWindowLayer

    cache = DynamicCache()
    cache.layers = [DynamicLayer(), DynamicSlidingWindowLayer(sliding_window=4)]
    grow(cache)
    assert [type(layer) for layer in cache.layers] == [GrowingLayer, DynamicSlidingWindowLayer]


def test_the_hf_engines_prefill_hands_out_a_growing_cache(tiny_model_path):
    from gem_train.engines.hf import HFEngine

    engine = HFEngine(tiny_model_path)
    cache, *_ = engine.prefill([[1, 2, 3], [4, 5]])
    assert cache.layers and all(type(layer) is GrowingLayer for layer in cache.layers)


def _layer(keys: torch.Tensor) -> GrowingLayer:
    layer = GrowingLayer()
    layer.update(keys, -keys)
    return layer


class Written(TorchDispatchMode):
    """Counts the elements torch's operations write (views write none)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.overloadpacket in (torch.ops.aten.index_put_, torch.ops.aten._index_put_impl_):
            self.elements += args[2].numel()  # it returns the whole tensor it wrote into
        elif not func.is_view:
            self.elements += sum(t.numel() for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor))
        return out


def _buffers(layer: GrowingLayer) -> tuple[int, int]:
    return layer._held[2].data_ptr(), layer._held[3].data_ptr()


def test_rows_leave_in_place_and_only_the_rows_that_move_are_copied():
    """The continuous engine keeps the rows that did not finish, without the columns that are padding in all of
    them: the rows' positions from ``start`` on, in the order asked. The views narrow to them in the same buffers; a
    row copied is one whose index changes (the engine moves the last row into a leaving row's place), and only its
    positions kept; the next step writes into room again."""
    k = torch.randn(16, 2, 6, 4)
    layer = _layer(k)
    buffers = _buffers(layer)
    order = [0, 15, *range(2, 15)]  # row 1 leaves, the last row takes its place
    with Written() as written:
        layer.keep(order, start=2)
    assert torch.equal(layer.keys, k[order][:, :, 2:]) and torch.equal(layer.values, -layer.keys)
    assert _buffers(layer) == buffers
    one_row = 2 * 4 * 4  # heads x positions kept x head dim
    assert written.elements <= 2 * (2 * one_row) + 8  # keys and values, each gathered then written; the indices
    new = torch.randn(15, 2, 1, 4)
    keys, _ = layer.update(new, -new)
    assert _buffers(layer) == buffers and torch.equal(keys, torch.cat([k[order][:, :, 2:], new], dim=2))
    layer.keep([2, 0], start=1)  # any order: rows gathered before any is written
    assert torch.equal(layer.keys, torch.cat([k[order][:, :, 2:], new], dim=2)[[2, 0]][:, :, 1:])


def test_rows_join_into_the_places_rows_left():
    """Rows that join take the rows and columns finished rows and dropped padding left: only they are written (and
    the running rows' new padding zeroed), in the same buffers. Their places outlast a move into a larger room."""
    k = torch.randn(4, 2, 6, 4)
    layer = _layer(k)
    layer.keep([0, 3, 2], start=2)  # one row and two columns free
    buffers = _buffers(layer)
    for _ in range(KV_ROOM + 1):  # the room fills, and the cache moves into larger buffers
        layer.update(torch.zeros(3, 2, 1, 4), torch.zeros(3, 2, 1, 4))
    assert _buffers(layer) != buffers and len(layer._held[2]) == 4
    running = layer.keys.clone()
    width = running.shape[-2]
    layer.keep([0, 1, 2], start=1)  # one column free again
    joining = _layer(torch.randn(1, 2, width, 4))
    buffers = _buffers(layer)
    with Written() as written:
        layer.stack(joining, width=width)  # one wider than the running rows
    zeros = torch.zeros(3, 2, 1, 4)
    assert torch.equal(layer.keys, torch.cat([torch.cat([zeros, running[:, :, 1:]], dim=2), joining.keys]))
    assert torch.equal(layer.values[:3], -layer.keys[:3]) and torch.equal(layer.values[3:], joining.values)
    assert _buffers(layer) == buffers
    assert written.elements <= 2 * (3 * 2 * 4 + 2 * width * 4)  # the running rows' new column, the new row


def test_rows_join_left_padded_with_one_copy_into_room():
    """Where no row is free, joining rows and running ones are copied once into new buffers with room."""
    a, b = torch.randn(2, 2, 5, 4), torch.randn(3, 2, 7, 4)
    layer, other = _layer(a), _layer(b)
    layer.stack(other, width=7)
    zeros = torch.zeros(2, 2, 2, 4)
    assert torch.equal(layer.keys, torch.cat([torch.cat([zeros, a], dim=2), b]))
    assert torch.equal(layer.values, -layer.keys)
    buffer = layer.keys.data_ptr()
    new = torch.randn(5, 2, 1, 4)
    keys, _ = layer.update(new, -new)
    assert keys.data_ptr() == buffer and keys.shape == (5, 2, 8, 4) and torch.equal(keys[:, :, 7:], new)


def test_rows_join_with_a_copy_where_the_padding_they_need_is_not_free():
    """A joining row wider than the running rows plus the columns free on their left: one copy, as above."""
    k = torch.randn(3, 2, 6, 4)
    layer = _layer(k)
    layer.keep([0, 1], start=1)  # a row free, one column free
    layer.stack(_layer(torch.randn(1, 2, 8, 4)), width=8)  # three columns of padding wanted
    assert torch.equal(layer.keys[:2], torch.cat([torch.zeros(2, 2, 3, 4), k[:2, :, 1:]], dim=2))
    assert layer.keys.shape == (3, 2, 8, 4)


def test_a_drained_batch_keeps_no_more_spare_rows_than_it_holds_when_it_moves():
    layer = _layer(torch.randn(8, 2, 3, 4))
    layer.keep([0, 1], start=0)  # six rows free
    for _ in range(KV_ROOM + 1):  # the room fills: the move keeps two spare rows of the six
        layer.update(torch.ones(2, 2, 1, 4), torch.ones(2, 2, 1, 4))
    assert len(layer._held[2]) == 4 and layer.keys.shape == (2, 2, 3 + KV_ROOM + 1, 4)
