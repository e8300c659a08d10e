import math

import pytest
import torch

from gem_train.algorithms.advantages import turn_advantages, whiten
from gem_train.algorithms.grpo import grpo_advantages, rloo_advantages
from gem_train.algorithms.ppo import explained_variance, gae, gae_turn_advantages, value_loss_sum
from gem_train.algorithms.rebn import mean_std, moments, rebn_advantages, rebn_turn_advantages
from gem_train.algorithms.reinforce import discounted_returns


def test_discounted_returns_by_hand():
    # G_2 = 1; G_1 = 0 + 0.5 * 1; G_0 = 0.2 + 0.5 * 0.5
    assert discounted_returns([0.2, 0.0, 1.0], gamma=0.5) == pytest.approx([0.45, 0.5, 1.0])
    assert discounted_returns([1.0, 1.0], gamma=1.0) == [2.0, 1.0]
    assert discounted_returns([], gamma=0.9) == []


def test_rebn_normalises_over_all_turns():
    returns = torch.tensor([0.0, 1.0, 2.0, 5.0])
    mean, std = 2.0, math.sqrt((4 + 1 + 0 + 9) / 3)  # unbiased std, as torch.std
    expected = [(r - mean) / std for r in (0.0, 1.0, 2.0, 5.0)]
    assert rebn_advantages(returns).tolist() == pytest.approx(expected, rel=1e-5)
    assert rebn_advantages(returns, normalize_std=False).tolist() == pytest.approx([-2.0, -1.0, 0.0, 3.0])


def test_rebn_turn_advantages_pool_turns_of_every_episode():
    # episode A: rewards [0, 1] -> returns [0.9, 1]; episode B: [-0.1] -> [-0.1]
    adv = turn_advantages([[0.0, 1.0], [-0.1]], [0, 1], "rebn", gamma=0.9)
    flat = torch.tensor([0.9, 1.0, -0.1], dtype=torch.float64)
    expected = ((flat - flat.mean()) / flat.std()).tolist()
    assert [len(a) for a in adv] == [2, 1]
    assert adv[0] + adv[1] == pytest.approx(expected, abs=1e-5)


def test_equal_returns_give_zero_advantage():
    adv = turn_advantages([[1.0], [1.0], [1.0]], [0, 1, 2], "rebn", gamma=1.0)
    assert adv == [[0.0], [0.0], [0.0]]


def test_grpo_normalises_within_groups_and_broadcasts_to_turns():
    returns = torch.tensor([1.0, 0.0, 5.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1])
    s = math.sqrt(0.5)
    assert grpo_advantages(returns, groups).tolist() == pytest.approx([0.5 / s, -0.5 / s, 0.0, 0.0], rel=1e-5)
    adv = turn_advantages([[0.0, 1.0], [0.0], [5.0], [2.0, 3.0]], [0, 0, 1, 1], "grpo", gamma=0.5)
    assert adv[0] == pytest.approx([0.5 / s] * 2, rel=1e-5)  # the undiscounted episode return, every turn
    assert adv[1] == pytest.approx([-0.5 / s], rel=1e-5)
    assert adv[2] == [0.0] and adv[3] == [0.0, 0.0]


def test_reinforce_is_raw_returns():
    assert turn_advantages([[0.0, 1.0]], [0], "reinforce", gamma=0.5) == [[0.5, 1.0]]
    with pytest.raises(ValueError, match="unknown advantage"):
        turn_advantages([[1.0]], [0], "nope", gamma=1.0)


def test_rloo_baseline_is_the_mean_of_the_other_episodes():
    # group 0: returns 1, 0, 0.5 -> baselines 0.25, 0.75, 0.5; group 1 has one episode: no baseline, 0
    adv = rloo_advantages(torch.tensor([1.0, 0.0, 0.5, 3.0]), torch.tensor([0, 0, 0, 1]))
    assert adv.tolist() == pytest.approx([0.75, -0.75, 0.0, 0.0])
    nested = turn_advantages([[0.0, 1.0], [0.0], [0.5], [3.0]], [0, 0, 0, 1], "rloo", gamma=0.5)
    assert nested == [pytest.approx([0.75, 0.75]), pytest.approx([-0.75]), pytest.approx([0.0]), [0.0]]


def test_gae_by_hand():
    # gamma 0.5, lambda 0.5, rewards [0, 1], values [0.2, 0.4], V(end) = 0
    # delta_1 = 1 - 0.4 = 0.6;  delta_0 = 0 + 0.5 * 0.4 - 0.2 = 0.0
    # A_1 = 0.6;  A_0 = 0.0 + 0.25 * 0.6 = 0.15;  targets = A + V = [0.35, 1.0]
    adv, targets = gae([0.0, 1.0], [0.2, 0.4], gamma=0.5, lam=0.5)
    assert adv == pytest.approx([0.15, 0.6]) and targets == pytest.approx([0.35, 1.0])
    # lambda 1: the Monte-Carlo return less the value; lambda 0: the one-step TD error
    adv1, _ = gae([0.0, 1.0], [0.2, 0.4], gamma=0.5, lam=1.0)
    assert adv1 == pytest.approx([0.5 - 0.2, 1.0 - 0.4])
    adv0, _ = gae([0.0, 1.0], [0.2, 0.4], gamma=0.5, lam=0.0)
    assert adv0 == pytest.approx([0.0, 0.6])
    # an episode cut short bootstraps from the value after its last turn
    assert gae([0.0], [0.0], gamma=0.5, lam=1.0, last_value=2.0)[0] == [1.0]
    with pytest.raises(ValueError, match="2 rewards but 1 values"):
        gae([0.0, 1.0], [0.0], 1.0, 1.0)


def test_ppo_turn_advantages_are_whitened_gae():
    rewards, values = [[0.0, 1.0], [-0.1]], [[0.2, 0.4], [0.0]]
    raw, targets = gae_turn_advantages(rewards, values, gamma=0.5, lam=0.5)
    assert raw == [pytest.approx([0.15, 0.6]), pytest.approx([-0.1])]
    assert targets[1] == pytest.approx([-0.1])
    flat = torch.tensor([0.15, 0.6, -0.1], dtype=torch.float64)
    expected = ((flat - flat.mean()) / flat.std()).tolist()
    adv = turn_advantages(rewards, [0, 1], "ppo", gamma=0.5, values=values, lam=0.5)
    assert adv[0] + adv[1] == pytest.approx(expected, abs=1e-5)
    assert turn_advantages(rewards, [0, 1], "ppo", 0.5, normalize_std=False, values=values, lam=0.5) == raw
    with pytest.raises(ValueError, match="critic"):
        turn_advantages(rewards, [0, 1], "ppo", gamma=0.5)


def test_value_loss_clipping_by_hand():
    values, old, targets = torch.tensor([1.0, 0.1]), torch.tensor([0.0, 0.0]), torch.tensor([0.0, 1.0])
    # turn 0: V=1 moved 1 from old 0 toward nowhere: unclipped (1-0)^2 = 1, clipped V=0.2 -> 0.04; max = 1
    # turn 1: V=0.1 (inside the clip range): both 0.81
    assert value_loss_sum(values, old, targets, clip=0.2).item() == pytest.approx(0.5 * (1.0 + 0.81))
    # a value that moved past the range *toward* the target is held at the clipped (worse) error
    far = value_loss_sum(torch.tensor([0.9]), torch.tensor([0.0]), torch.tensor([1.0]), clip=0.2)
    assert far.item() == pytest.approx(0.5 * 0.8 ** 2)
    assert value_loss_sum(torch.tensor([0.9]), torch.tensor([0.0]), torch.tensor([1.0])).item() == pytest.approx(
        0.5 * 0.01)
    v = torch.tensor([0.9], requires_grad=True)
    value_loss_sum(v, torch.tensor([0.0]), torch.tensor([1.0]), clip=0.2).backward()
    assert v.grad.item() == 0.0  # the clipped branch carries no gradient to V


def test_explained_variance():
    assert explained_variance(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 3.0])) == pytest.approx(0.0)
    assert explained_variance(torch.tensor([2.0, 2.0]), torch.tensor([1.0, 3.0])) == pytest.approx(0.0)
    assert explained_variance(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 3.0])) == 1.0
    assert explained_variance(torch.tensor([1.0]), torch.tensor([1.0])) == 0.0


def test_moments_give_torch_mean_and_std():
    x = torch.tensor([0.5, -1.0, 2.0, 7.0], dtype=torch.float64)
    mean, std = mean_std(moments(x))
    assert (mean, std) == (pytest.approx(float(x.mean())), pytest.approx(float(x.std())))
    assert mean_std((0.0, 0.0, 0.0)) == (0.0, 0.0) and mean_std(moments(torch.tensor([3.0]))) == (3.0, 0.0)


def test_rebn_on_shards_with_reduced_moments_equals_the_whole_batch():
    # two ranks each hold part of the batch; summing their moments (what an all-reduce does) gives
    # each rank the global statistics, and the shards' advantages are the whole batch's
    rewards = [[0.0, 1.0], [-0.1], [0.0, 0.0, 1.0], [0.5]]
    whole = rebn_turn_advantages(rewards, gamma=0.9)
    shards = [rewards[:2], rewards[2:]]
    flat = [torch.tensor([g for ep in s for g in discounted_returns_all(ep)], dtype=torch.float64) for s in shards]
    total = tuple(sum(m) for m in zip(*(moments(f) for f in flat)))
    parts = [rebn_turn_advantages(s, gamma=0.9, reduce=lambda _m: total) for s in shards]
    assert parts[0] + parts[1] == [pytest.approx(a, abs=1e-9) for a in whole]
    assert whiten([[1.0, 3.0]]) == [pytest.approx([-0.7071, 0.7071], abs=1e-4)]


def discounted_returns_all(episode):
    return discounted_returns(episode, 0.9)


@pytest.mark.parametrize("module", ["advantages", "grpo", "ppo", "rebn", "reinforce"])
def test_the_worked_examples_in_the_docstrings_hold(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"gem_train.algorithms.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
