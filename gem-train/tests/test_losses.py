import math

import pytest
import torch

from gem_train.algorithms.losses import entropy, loss_normaliser, policy_loss_sum, token_logprobs


def test_token_logprobs_with_temperature():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # (1, 1, 2)
    assert token_logprobs(logits, torch.tensor([[1]])).item() == pytest.approx(math.log(0.75))
    # at temperature 2 the probabilities are softmax([0, log 3 / 2]) = [1, sqrt 3] / (1 + sqrt 3)
    p = math.sqrt(3) / (1 + math.sqrt(3))
    assert token_logprobs(logits, torch.tensor([[1]]), temperature=2.0).item() == pytest.approx(math.log(p))
    assert entropy(torch.zeros(1, 1, 4)).item() == pytest.approx(math.log(4))


def test_reinforce_loss_and_gradient_by_hand():
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # the second turn has 2 response tokens
    adv = torch.tensor([2.0, -1.0])
    loss, _ = policy_loss_sum(logp, logp.detach(), adv, mask, "reinforce")
    # -(2 * (-1 - 2 - 3)) - (-1 * (-0.5 - 0.5)) = 12 - 1
    assert loss.item() == pytest.approx(11.0)
    loss.backward()
    assert logp.grad.tolist() == [[-2.0, -2.0, -2.0], [1.0, 1.0, 0.0]]


def test_truncated_importance_weight_caps_the_ratio():
    logp = torch.tensor([[math.log(0.5), math.log(0.5)]], requires_grad=True)
    sampler = torch.tensor([[math.log(0.1), math.log(0.5)]])  # ratios 5 and 1
    mask = torch.ones(1, 2)
    loss, stats = policy_loss_sum(logp, sampler, torch.tensor([1.0]), mask, "reinforce", tis_cap=2.0)
    assert loss.item() == pytest.approx(-(2.0 * math.log(0.5) + 1.0 * math.log(0.5)))
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-2.0, -1.0])  # the weight carries no gradient
    assert stats["ratio_mean"] == pytest.approx(3.0)


def test_ppo_clip_by_hand():
    sampler = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    # ratios 1.5 (A > 0: clipped to 1.2), 0.5 (min keeps the unclipped 0.5), 1.0
    logp = torch.log(torch.tensor([[0.75, 0.25, 0.5]])).requires_grad_()
    mask = torch.ones(1, 3)
    loss, stats = policy_loss_sum(logp, sampler, torch.tensor([1.0]), mask, "ppo_clip", clip_eps=0.2)
    assert loss.item() == pytest.approx(-(1.2 + 0.5 + 1.0))
    loss.backward()
    # no gradient through the clipped token; d(-rho)/dlogp = -rho elsewhere
    assert logp.grad[0].tolist() == pytest.approx([0.0, -0.5, -1.0])
    assert stats["clip_frac"] == pytest.approx(1 / 3)
    neg, _ = policy_loss_sum(logp.detach(), sampler, torch.tensor([-1.0]), mask, "ppo_clip", clip_eps=0.2)
    # A < 0: min(-rho, -clip(rho)) -> -1.5, -0.8, -1.0
    assert neg.item() == pytest.approx(1.5 + 0.8 + 1.0)


def test_on_policy_ppo_gradient_equals_reinforce_gradient():
    torch.manual_seed(0)
    base = torch.randn(3, 4)
    adv = torch.randn(3)
    mask = (torch.rand(3, 4) > 0.3).float()
    grads = []
    for kind in ("reinforce", "ppo_clip"):
        logp = base.clone().requires_grad_()
        loss, stats = policy_loss_sum(logp, base, adv, mask, kind)
        loss.backward()
        grads.append(logp.grad)
        assert stats["kl_sampler"] == pytest.approx(0.0)
    assert torch.allclose(grads[0], grads[1])


def test_loss_normalisers():
    assert loss_normaliser("constant", num_turns=4, num_tokens=17, constant=32) == 128
    assert loss_normaliser("length", num_turns=4, num_tokens=17, constant=32) == 17
    with pytest.raises(ValueError):
        loss_normaliser("other", 1, 1, 1)
