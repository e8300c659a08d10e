"""The HF engines' KV cache layer (gem_train.engines.kv_cache): decode steps write into spare room instead of
concatenating each layer's whole cache, and compute what transformers' own layer computes."""

from __future__ import annotations

import pytest
import torch
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


def test_rows_leave_with_one_copy_into_room():
    """The continuous engine keeps the rows that did not finish, without the columns that are padding in all of
    them: the rows' positions from ``start`` on, in that order, and the next step writes into room again."""
    k = torch.randn(3, 2, 6, 4)
    layer = _layer(k)
    layer.keep(torch.tensor([2, 0]), start=2)
    assert torch.equal(layer.keys, k[[2, 0]][:, :, 2:]) and torch.equal(layer.values, -layer.keys)
    buffer = layer.keys.data_ptr()
    new = torch.randn(2, 2, 1, 4)
    keys, _ = layer.update(new, -new)
    assert keys.data_ptr() == buffer and torch.equal(keys, torch.cat([k[[2, 0]][:, :, 2:], new], dim=2))


def test_rows_join_left_padded_with_one_copy_into_room():
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


def test_rows_leave_intact_where_index_select_does_not_write_through_out(monkeypatch):
    """A backend may give ``out`` storage of its own instead of writing through the strided view: the rows are
    copied into the room then (a stand-in for such a backend: none of torch's CPU kernels does it)."""
    real = torch.index_select

    def own_storage(source, dim, index, *, out):
        out.set_(real(source, dim, index))
        return out

    k = torch.randn(3, 2, 6, 4)
    layer = _layer(k)
    monkeypatch.setattr(torch, "index_select", own_storage)
    layer.keep(torch.tensor([1, 2]), start=1)
    assert torch.equal(layer.keys, k[[1, 2]][:, :, 1:]) and torch.equal(layer.values, -layer.keys)
