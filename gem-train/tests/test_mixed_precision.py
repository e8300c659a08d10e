"""Mixed precision done right (issue 35, point 1): float32 master weights and optimizer state, bf16 compute, the
sampler's weights in its dtype at each sync, and checkpoints that keep the masters (and a compute-dtype copy to
serve beside them).

Before, ``model.dtype=bfloat16`` made the parameters and AdamW's state bf16: at lr 1e-6 three updates changed
1.8 % of the weights and no norm weight at all (an Adam step of 1e-6 is below bf16's resolution at 1.0)."""

from __future__ import annotations

import pytest
import torch
from test_learner import samples_from

from gem_train.checkpoint import save_checkpoint
from gem_train.config import AlgoConfig, TrainerConfig
from gem_train.learner import Learner
from gem_train.model import load_policy


def test_one_bf16_update_at_lr_1e_6_moves_every_matrix_and_norm_of_the_fp32_masters(tiny_model_path, tmp_path):
    model, tok = load_policy(tiny_model_path, "float32")
    learner = Learner(model, AlgoConfig(), TrainerConfig(lr=1e-6, max_grad_norm=None), 1.0, 8.0, tok.pad_token_id,
                      compute_dtype="bfloat16")
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    samples = samples_from(model, tok, n=8)
    metrics = learner.update(samples, [1.0, -0.5, 0.3, 0.8, -1.2, 0.7, 0.2, -0.4])
    assert metrics["optimizer_steps"] == 1.0
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32, name
        moved = (p.detach() != before[name]).float().mean().item()
        assert moved >= 0.99, f"{name}: only {moved:.2%} of its elements moved"
    assert all(s.dtype == torch.float32 for state in learner.optimizer.state.values() for s in state.values()
               if torch.is_tensor(s) and s.is_floating_point())
    # the sampler gets bf16 weights, the tied head once, as the embedding; the checkpoint keeps the float32 masters
    synced = learner.state_dict(torch.bfloat16)
    assert {v.dtype for v in synced.values()} == {torch.bfloat16}
    assert learner.tied == {"lm_head.weight"}
    assert "lm_head.weight" not in synced and "model.embed_tokens.weight" in synced
    path = save_checkpoint(tmp_path, 1, model, tok, learner.optimizer, {}, serve_dtype=torch.bfloat16)
    reloaded, _ = load_policy(path, "float32")
    for name, p in reloaded.named_parameters():
        assert torch.equal(p, dict(model.named_parameters())[name].detach()), name
    # beside them, serve/: the same model in the compute dtype, the folder to serve
    from safetensors import safe_open

    served = next((path / "serve").glob("*.safetensors"))
    with safe_open(str(served), "pt") as f, safe_open(str(next(path.glob("*.safetensors"))), "pt") as masters:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
        # the tied head is not written twice (it was: the embedding again, Qwen3-1.7B's largest tensor)
        assert set(f.keys()) == set(masters.keys()) and "lm_head.weight" not in f.keys()
        for k in f.keys():
            assert torch.equal(f.get_tensor(k), model.state_dict()[k].detach().to(torch.bfloat16)), k
    assert served.stat().st_size < 0.6 * next(path.glob("*.safetensors")).stat().st_size
    serve_model, _ = load_policy(path / "serve", "bfloat16")  # an ordinary HF folder, tokenizer included
    assert serve_model.dtype == torch.bfloat16
    assert torch.equal(serve_model.lm_head.weight, model.model.embed_tokens.weight.detach().to(torch.bfloat16))


def test_the_learner_refuses_low_precision_parameters(tiny_model_path):
    model, tok = load_policy(tiny_model_path, "bfloat16")
    with pytest.raises(ValueError, match="float32 master weights"):
        Learner(model, AlgoConfig(), TrainerConfig(), 1.0, 8.0, tok.pad_token_id)


def test_the_sync_wakes_the_samplers_weights_streams_them_in_its_dtype_then_wakes_its_cache(tiny_model_path):
    """After the update the sampler wakes its weights alone, takes the weights as pairs made one at a time in its
    dtype, then wakes the rest (vLLM's KV cache): a whole bf16 copy beside the woken vLLM would not fit 4B on 80 GB
    (``tests/test_plan.py``), and the KV cache is not held beside the tensor in flight. The sampler is a stand-in
    that records (vLLM's sleep mode needs a GPU)."""
    from collections.abc import Mapping

    from gem_train.trainer import _sync

    model, tok = load_policy(tiny_model_path, "float32")
    learner = Learner(model, AlgoConfig(), TrainerConfig(), 1.0, 8.0, tok.pad_token_id, compute_dtype="bfloat16")
    events: list = []

    class Sampler:
        def wake(self, *tags: str) -> None:
            events.append(("wake", tags))

        def load_weights(self, weights) -> None:
            assert not isinstance(weights, Mapping)  # pairs, each made as it is taken
            events.extend(tensor.dtype for _, tensor in weights)

    _sync(learner, Sampler(), torch.bfloat16)
    assert events[0] == ("wake", ("weights",)) and events[-1] == ("wake", ())
    # every weight once: the tied head is the embedding
    assert set(events[1:-1]) == {torch.bfloat16} and len(events) - 2 == len(model.state_dict()) - 1


def test_vllm_wakes_after_torch_gives_back_the_updates_cached_blocks(monkeypatch):
    """vLLM's allocator is not torch's: the blocks the update freed go back to the device before vLLM takes its
    share again, or the plan's peak (the larger phase, not their sum) would not hold. A stand-in for vllm.LLM
    (sleep mode needs a GPU)."""
    from types import SimpleNamespace

    from gem_train.engines.vllm import VLLMEngine

    calls: list[str] = []
    engine = VLLMEngine.__new__(VLLMEngine)
    config = SimpleNamespace(model_config=SimpleNamespace(enable_sleep_mode=True))
    engine.llm = SimpleNamespace(llm_engine=SimpleNamespace(vllm_config=config),
                                 wake_up=lambda tags: calls.append(("wake_up", tags)))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    engine.wake("weights")
    engine.wake()  # the rest: vLLM's tags=None wakes what still sleeps
    assert calls == ["empty_cache", ("wake_up", ["weights"]), "empty_cache", ("wake_up", None)]
