"""rg:composite: reasoning-gym's composite dataset, offline, with its sub-datasets named."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("reasoning_gym")

import gem
from gem.testing import check_env
from gem_envs_math.rg_datasets import COMPOSITE_DEFAULT


def test_default_mix_conforms_and_scores_by_sub_dataset():
    env = gem.make("rg:composite")
    check_env(env, num_random_strings=20)
    seen = set()
    for seed in range(12):
        _q, info = env.reset(seed=seed)
        seen.add(info["dataset"])
        _obs, reward, terminated, _tr, step_info = env.step(f"\\boxed{{{env.answer}}}")
        assert reward == 1.0 and terminated and step_info["dataset"] == info["dataset"]
    assert seen <= set(COMPOSITE_DEFAULT) and len(seen) > 1
    env.reset(seed=0)
    assert env.step("\\boxed{surely wrong 123}")[1] < 1.0


def test_explicit_configuration_idx_and_state():
    env = gem.make("rg:composite", datasets=["leg_counting", {"name": "chain_sum", "weight": 3, "config": {}}])
    assert {env.reset(seed=s)[1]["dataset"] for s in range(10)} <= {"leg_counting", "chain_sum"}
    first = env.reset(idx=3)
    assert env.reset(idx=3) == first
    env.reset(seed=5)
    state = json.loads(json.dumps(env.get_state()))
    question = env.entry["question"]
    twin = gem.make("rg:composite", datasets=["leg_counting", {"name": "chain_sum", "weight": 3, "config": {}}])
    twin.set_state(state)
    assert twin.entry["question"] == question


@pytest.mark.parametrize("bad", [[], ["no_such_dataset"], ["composite"], [{"name": "chain_sum", "weight": 0}]])
def test_bad_configurations_name_the_problem(bad):
    with pytest.raises(ValueError, match="composite"):
        gem.make("rg:composite", datasets=bad)


def test_geometry3k_is_registered_hub_only():
    from gem.errors import DataUnavailableError

    with pytest.raises(DataUnavailableError, match="axon-rl/geometry3k"):
        gem.make("math:Geometry3K")
