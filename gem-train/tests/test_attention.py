"""The HF engines' attention (gem_train.engines.attention): a decode step's grouped query heads attend to the KV
cache as it is, computing what transformers' sdpa attention computes after repeating each key/value head."""

from __future__ import annotations

import pytest
import torch
import transformers.integrations.sdpa_attention as sdpa
from transformers import AutoModelForCausalLM, Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention

from gem_train.engines.attention import NAME, grouped_decode_attention, use_grouped_decode
from gem_train.engines.base import Sampling


def _attention(heads: int = 8, kv_heads: int = 2) -> Qwen3Attention:
    config = Qwen3Config(hidden_size=64, num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=16)
    return Qwen3Attention(config, layer_idx=0)


def _inputs(positions: int, heads: int = 8, kv_heads: int = 2, keys: int = 37):
    """query, key and value, keys and values as views of larger buffers (as the HF engines' cache hands them out),
    and a left-padded boolean mask as transformers makes it for sdpa: (batch, 1, positions, keys)."""
    torch.manual_seed(0)
    query = torch.randn(3, positions, heads, 16).transpose(1, 2)  # as the attention layer hands it over
    key = torch.randn(3, kv_heads, keys + 9, 16)[:, :, :keys]
    value = torch.randn(3, kv_heads, keys + 9, 16)[:, :, :keys]
    mask = torch.ones(3, 1, positions, keys, dtype=torch.bool).tril(keys - positions)
    mask[0, :, :, :5] = False  # row 0 left-padded by five positions
    return query, key, value, mask


@pytest.mark.parametrize("masked", [True, False])
def test_a_decode_step_attends_as_transformers_sdpa_does(masked):
    module = _attention()
    query, key, value, mask = _inputs(positions=1)
    mask = mask if masked else None
    ours, _ = grouped_decode_attention(module, query, key, value, mask, scaling=module.scaling)
    theirs, _ = sdpa.sdpa_attention_forward(module, query, key, value, mask, scaling=module.scaling)
    assert ours.shape == theirs.shape == (3, 1, 8, 16)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("extra", [{}, {"output_attentions": False, "position_bias": None, "sliding_window": None}],
                         ids=["plain", "unset options"])  # transformers 4.53 passes output_attentions=False
def test_a_decode_step_repeats_no_key_value_head(monkeypatch, extra):
    module = _attention()
    query, key, value, mask = _inputs(positions=1)
    repeated = []
    monkeypatch.setattr(sdpa, "repeat_kv", lambda states, n: repeated.append(n) or states.repeat_interleave(n, 1))
    sdpa.sdpa_attention_forward(module, query, key, value, mask)
    assert repeated == [4, 4]  # transformers' sdpa copies keys and values four times over, as a mask is given
    repeated.clear()
    grouped_decode_attention(module, query, key, value, mask, **extra)
    assert repeated == []


@pytest.mark.parametrize("case", ["prompt pass", "one key/value head per query head", "position bias",
                                  "a mask per head"])
def test_every_other_call_is_transformers_sdpa_unchanged(case):
    module = _attention(kv_heads=8) if case == "one key/value head per query head" else _attention()
    query, key, value, mask = _inputs(positions=5 if case == "prompt pass" else 1,
                                      kv_heads=8 if case == "one key/value head per query head" else 2)
    extra = {"position_bias": torch.randn(1, 8, query.shape[2], key.shape[2])} if case == "position bias" else {}
    if case == "a mask per head":
        mask = mask.expand(3, 8, 1, key.shape[2]).clone()
        mask[:, 3, :, 7] = False
    ours, _ = grouped_decode_attention(module, query, key, value, mask, **extra)
    theirs, _ = sdpa.sdpa_attention_forward(module, query, key, value, mask, **extra)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("kind", ["hf", "hf_async"])
def test_the_hf_engines_decode_with_it(tiny_model_path, kind):
    from gem_train.engines import make_engine

    engine = make_engine(kind, str(tiny_model_path), max_model_len=256)
    try:
        assert engine.model.config._attn_implementation == NAME
        assert engine.model.config.num_attention_heads > engine.model.config.num_key_value_heads  # grouped
    finally:
        engine.close()


def test_the_hf_engine_samples_what_it_samples_with_transformers_sdpa(tiny_model_path, monkeypatch):
    """Greedy replies to prompts of different lengths (left-padded, so attention is masked): the same tokens and
    logprobs as with transformers' sdpa attention, with no key/value head repeated in any decode step."""
    from gem_train.engines.hf import HFEngine

    engine = HFEngine(str(tiny_model_path))
    prompts = [[5, 6, 7, 8, 9, 10, 11], [12, 13], [14, 15, 16, 17]]
    greedy = Sampling(temperature=0.0, max_tokens=24)
    repeated = []
    monkeypatch.setattr(sdpa, "repeat_kv", lambda states, n: repeated.append(n) or states.repeat_interleave(n, 1))
    monkeypatch.setattr(engine, "prefill", _counting(engine.prefill, repeated))
    ours = engine.generate(prompts, greedy)
    assert repeated == ["prefill"]  # the prompt pass repeats (transformers' sdpa); no decode step does
    engine.model.set_attn_implementation("sdpa")
    repeated.clear()
    theirs = engine.generate(prompts, greedy)
    assert len(repeated) > 1 + engine.model.config.num_hidden_layers  # decode steps repeated heads there
    for a, b in zip(ours, theirs):
        assert a.token_ids == b.token_ids
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs), rtol=1e-5, atol=1e-5)


def _counting(prefill, calls: list):
    """``prefill`` that records its own call and drops the repeats the prompt pass made."""

    def wrapped(prompts):
        out = prefill(prompts)
        calls[:] = ["prefill"]
        return out

    return wrapped


def test_a_model_without_sdpa_attention_is_left_alone(tiny_model_path):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, attn_implementation="eager")
    assert not use_grouped_decode(model)
    assert model.config._attn_implementation == "eager"
