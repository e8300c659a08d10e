"""The rg: bridge: lazy import, every dataset makes and scores, state and seeding."""

from __future__ import annotations

import subprocess
import sys

import pytest
import reasoning_gym

import gem
from gem.testing import check_env
from gem_envs_math.rg_datasets import RG_DATASETS


def test_the_id_list_matches_the_installed_reasoning_gym() -> None:
    assert set(RG_DATASETS) == set(reasoning_gym.factory.DATASETS) - {"composite"}
    # composite is registered apart, with its sub-datasets named (tests/test_rg_composite.py)
    assert {i.removeprefix("rg:") for i in gem.list_envs("rg:*")} == set(RG_DATASETS) | {"composite"}


def test_registering_does_not_import_reasoning_gym() -> None:
    probe = (
        "import sys, gem; ids = gem.list_envs('rg:*'); assert len(ids) == 106, ids;"
        "print('reasoning_gym' in sys.modules); gem.make('rg:leg_counting'); print('reasoning_gym' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


@pytest.mark.parametrize("name", ["leg_counting", "basic_arithmetic", "word_sorting", "gcd", "maze"])
def test_scores_with_the_datasets_own_scorer(name: str) -> None:
    env = gem.make(f"rg:{name}")
    question, _ = env.reset(seed=0)
    assert question == env.entry["question"]
    entry = env.entry
    dataset = reasoning_gym.create_dataset(name, size=500, seed=env._current[0])
    assert dataset[env._current[1]] == entry
    right = rf"reasoning... \boxed{{{entry['answer']}}}"
    _, reward, terminated, _, info = env.step(right)
    assert (reward, terminated, info["correct"]) == (1.0, True, True)
    assert info["format_error"] is False
    assert reward == dataset.score_answer(entry["answer"], entry)
    env.reset(seed=0)
    assert env.step(r"\boxed{definitely not it}")[1] == dataset.score_answer("definitely not it", entry) < 1.0
    env.reset(seed=0)
    _, reward, _, _, info = env.step("no final answer")
    assert (reward, info["format_error"]) == (0.0, True)


def test_idx_poses_the_reference_dataset() -> None:
    env = gem.make("rg:chain_sum")
    fixed = reasoning_gym.create_dataset("chain_sum", size=500, seed=42)
    assert [env.reset(idx=i)[0] for i in range(3)] == [fixed[i]["question"] for i in range(3)]


def test_epochs_renew_the_dataset() -> None:
    env = gem.make("rg:basic_arithmetic", size=3)
    env.reset(seed=1)
    first = [env._current[0]] + [(env.reset(), env._current[0])[1] for _ in range(2)]
    env.reset()
    assert len(set(first)) == 1 and env._current[0] != first[0]


def test_make_every_rg_id_and_check_a_sample() -> None:
    envs = {env_id: gem.make(env_id) for env_id in gem.list_envs("rg:*")}
    assert len(envs) == 106
    for env_id in sorted(envs)[::15]:
        check_env(envs[env_id], num_random_strings=5)
