"""Bounded learner memory (issue 35, point 2): log-probs only at the trained positions, computed in chunks whose
logits are recomputed in the backward pass; gradient checkpointing; micro-batches by a token budget. Each gives the
same gradients as the plain computation."""

from __future__ import annotations

import copy

import pytest
import torch
from test_learner import samples_from

from gem_train.algorithms.losses import token_logprobs
from gem_train.config import AlgoConfig, TrainerConfig
from gem_train.learner import Learner, pack
from gem_train.model import load_policy

ADV = [1.0, -0.5, 0.3, 0.0, -1.2, 0.7]


def test_the_head_sees_only_trained_positions_a_chunk_at_a_time(tiny_model_path):
    model, tok = load_policy(tiny_model_path)
    samples = samples_from(model, tok)
    learner = Learner(model, AlgoConfig(), TrainerConfig(logprob_chunk=3), 1.0, 8.0, tok.pad_token_id)
    batch = pack(samples, tok.pad_token_id)
    rows: list[int] = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, i, o: rows.append(i[0].shape[0]))
    try:
        logprobs, _, _ = learner._forward(batch)
    finally:
        hook.remove()
    trained = int(batch["mask"].sum())
    assert sum(rows) == trained and max(rows) <= 3  # never the prompt's positions, never more than a chunk
    with torch.no_grad():  # the same numbers as full logits at every position
        full = token_logprobs(model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1],
                              batch["targets"])
    assert torch.allclose(logprobs.detach() * batch["mask"], full * batch["mask"], atol=1e-5)


def _gradients(model, samples, trainer: TrainerConfig) -> dict[str, torch.Tensor]:
    model = copy.deepcopy(model)
    learner = Learner(model, AlgoConfig(), trainer, 1.0, 8.0, 0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    learner.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)  # the step is the gradient itself
    learner.update(samples, ADV)
    return {k: before[k] - v for k, v in model.state_dict().items()}


@pytest.mark.parametrize("trainer", [
    TrainerConfig(max_grad_norm=None, logprob_chunk=2),
    TrainerConfig(max_grad_norm=None, gradient_checkpointing=True),
    TrainerConfig(max_grad_norm=None, micro_batch_tokens=40),
], ids=["chunked", "checkpointed", "token-budget"])
def test_the_memory_bounded_paths_give_the_plain_gradient(tiny_model_path, trainer):
    model, tok = load_policy(tiny_model_path)
    samples = samples_from(model, tok)
    plain = _gradients(model, samples, TrainerConfig(max_grad_norm=None))  # the whole logits in one pass
    bounded = _gradients(model, samples, trainer)
    for name, grad in plain.items():
        assert torch.allclose(bounded[name], grad, atol=1e-6, rtol=1e-4), name
