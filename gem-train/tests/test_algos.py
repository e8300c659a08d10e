"""The algorithm objects lay the estimators' advantages beside the turns; the shards split a batch as one process
would play it."""

from __future__ import annotations

import pytest

from gem_train.algorithms.advantages import ESTIMATORS, turn_advantages
from gem_train.algos import ALGORITHMS, Batch, make_algorithm
from gem_train.config import AlgoConfig
from gem_train.rollout import Episode, TurnSample
from gem_train.sharding import Shards

REWARDS = [[0.0, 1.0], [-0.1], [0.0, 0.0, 1.0], [0.5]]


def episodes() -> list[Episode]:
    return [Episode(i, i // 2, [TurnSample([1], [2, 3], [-0.5, -0.5], "stop", r) for r in rewards])
            for i, rewards in enumerate(REWARDS)]


def test_there_is_one_object_per_estimator():
    assert set(ALGORITHMS) == set(ESTIMATORS)
    with pytest.raises(ValueError, match="unknown algo.name 'ppo2'"):
        make_algorithm(AlgoConfig(name="ppo2"))


@pytest.mark.parametrize("name", ["rebn", "grpo", "rloo", "reinforce"])
def test_prepare_gives_every_turn_its_estimators_advantage(name):
    cfg = AlgoConfig(name=name, gamma=0.9)
    batch = make_algorithm(cfg).prepare(episodes())
    nested = turn_advantages(REWARDS, [0, 0, 1, 1], name, 0.9)
    assert batch.inputs == {"advantages": [a for ep in nested for a in ep]}
    assert batch.samples == [t for ep in episodes() for t in ep.turns] and batch.metrics == {}
    # keep: the first turns are trained on, normalised with the statistics of all
    kept = make_algorithm(cfg).prepare(episodes(), keep=3)
    assert kept.inputs["advantages"] == batch.inputs["advantages"][:3] and len(kept.samples) == 3


def test_every_rank_plays_whole_groups_and_rank0_plays_all():
    shares = [Shards("every_rank", r, 3).episodes(groups=4, group_size=2) for r in range(3)]
    assert shares == [(0, 4), (4, 6), (6, 8)]
    assert [Shards("rank0", r, 3).episodes(groups=4, group_size=2) for r in range(3)] == [(0, 8), (0, 0), (0, 0)]
    assert [Shards("rank0", r, 2).plays for r in range(2)] == [True, False] and Shards("every_rank", 1, 2).plays


def test_the_ranks_keep_the_first_turns_per_iter_turns_of_all():
    # two waves; rank 0 played 5 then 4 turns, rank 1 6 then 3: 18 in all, 15 kept
    counts = [[5, 6], [4, 3]]
    kept = [Shards("every_rank", r, 2).kept_turns(counts, 15) for r in range(2)]
    assert kept == [9, 6] and Shards().kept_turns([[12]], None) is None


def test_a_batch_is_cut_beside_its_inputs():
    batch = Batch([TurnSample([1], [2], [0.0], "stop")] * 3, {"advantages": [1.0, 2.0, 3.0]}, {"m": 1.0})
    assert batch.first(2).inputs == {"advantages": [1.0, 2.0]} and batch.first(2).metrics == {"m": 1.0}
    assert batch.first(None) is batch
    assert Shards("rank0").learner_share(batch) is batch  # a world of one keeps the whole batch


def test_one_registry_serves_validation_and_the_trainer(monkeypatch):
    """Issue 35, point 9: two registries of names (kept equal by a test), and make_algorithm special-cased
    ``cls is PPO``, so a PPO subclass crashed. Now every algorithm is built as cls(cfg, **context) from the one
    registry, which config validation reads too."""
    from gem_train.algorithms import registry
    from gem_train.algorithms.ppo import PPO
    from gem_train.config import ConfigError, TrainConfig, validate

    class TurnPPO(PPO):
        name = "turn_ppo"

    critic = object()
    monkeypatch.setitem(registry.ALGORITHMS, "turn_ppo", TurnPPO)
    built = make_algorithm(AlgoConfig(name="turn_ppo"), critic=critic, encode=None)
    assert isinstance(built, TurnPPO) and built.critic is critic
    assert isinstance(make_algorithm(AlgoConfig(name="rebn"), policy=None, checkpoint=None), ALGORITHMS["rebn"])
    cfg = TrainConfig()
    cfg.algo.name = "turn_ppo"
    validate(cfg)  # the registry's names are what validation accepts
    cfg.algo.name = "nope"
    with pytest.raises(ConfigError, match="algo.name: must be one of grpo, ppo, rebn, reinforce, rloo, turn_ppo"):
        validate(cfg)


@pytest.mark.parametrize("name", ["grpo", "rloo"])
def test_a_discount_the_group_estimators_would_ignore_is_refused(name):
    from gem_train.config import ConfigError, TrainConfig, validate

    cfg = TrainConfig()
    cfg.algo.name, cfg.algo.group_size, cfg.algo.gamma = name, 2, 0.9
    with pytest.raises(ConfigError, match=f"algo.gamma: {name} scores an episode by its undiscounted return"):
        validate(cfg)
    cfg.algo.gamma = 1.0
    validate(cfg)
