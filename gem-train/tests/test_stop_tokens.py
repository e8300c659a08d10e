"""Sampling stops at the chat template's end of turn (issue 35, point 4): a base model's generation config names
only its eos (Qwen3-Base: <|endoftext|>), while a ChatML turn ends with <|im_end|>; without that stop a reply ran to
max_tokens."""

from __future__ import annotations

import pytest

from gem_train.tokenizer import IM_END, PAD, train_chat_tokenizer, turn_end_ids


def test_the_end_of_turn_token_stops_sampling_besides_the_eos():
    tok = train_chat_tokenizer(["hello there", "guess a number"], vocab_size=300)
    im_end = tok.convert_tokens_to_ids(IM_END)
    assert turn_end_ids(tok) == [im_end]
    tok.eos_token = PAD  # a base model's eos that is not the template's end of turn
    assert turn_end_ids(tok) == [tok.convert_tokens_to_ids(PAD), im_end]


def test_vllm_requests_carry_the_stops():
    pytest.importorskip("vllm")
    from gem_train.engines.base import Sampling
    from gem_train.engines.vllm import sampling_params

    params = sampling_params(Sampling(temperature=1.0, max_tokens=8), seed=1, stop_ids=[7, 9])
    assert list(params.stop_token_ids) == [7, 9]
