import math

import pytest
import torch

from gem_train.algorithms.advantages import discounted_returns, grpo_advantages, rebn_advantages, turn_advantages


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
