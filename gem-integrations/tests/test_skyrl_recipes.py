"""The SkyRL recipes' dry run (examples/skyrl/gem_skyrl.py dry-run) refuses recipes that would not
train as they say: skyrl-train's real hydra config and ``validate_cfg``, plus gem's checks.

The four shipped recipes' dry runs pass in the nox session's check block
(examples/skyrl/README.md); here each broken variant of one of them must fail, which a dry run
that only parsed the YAML would not. Needs skyrl-train (installed on Python 3.11 with
``--no-deps --ignore-requires-python`` in the nox session).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("skyrl_gym")
pytest.importorskip("skyrl_train")
pytest.importorskip("yaml")

import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "examples" / "skyrl" / "recipes"


@pytest.fixture(scope="module")
def gem_skyrl():
    spec = importlib.util.spec_from_file_location("gem_skyrl", ROOT / "examples" / "skyrl" / "gem_skyrl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def variant(tmp_path, name, replace=None, drop=(), add=()):
    recipe = yaml.safe_load((RECIPES / f"{name}.yaml").read_text())
    overrides = [o for o in recipe["overrides"] if o.split("=", 1)[0] not in drop]
    recipe["overrides"] = [replace.get(o.split("=", 1)[0], o) if replace else o for o in overrides] + list(add)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_every_recipe_has_a_launch_script_naming_it():
    recipes = sorted(RECIPES.glob("*.yaml"))
    assert len(recipes) == 4
    for recipe in recipes:
        script = recipe.with_suffix(".sh").read_text()
        assert f"examples/skyrl/recipes/{recipe.name}" in script and "dry-run" in script


def test_a_shipped_recipe_passes(gem_skyrl, capsys):
    gem_skyrl.dry_run(RECIPES / "game_rebn_qwen3_4b_2nodes.yaml")
    assert "2 node(s) x 8 GPUs, gem_rebn (gamma 0.9)" in capsys.readouterr().out


@pytest.mark.parametrize(("change", "message"), [
    ({"replace": {"trainer.algorithm.gamma": "trainer.algorithm.gamma=1.0"}}, "gamma"),
    ({"replace": {"trainer.algorithm.advantage_estimator": "trainer.algorithm.advantage_estimator=grpo"}},
     "advantage_estimator"),
    # the recipe says two nodes; a config for one (consistent in itself) passes skyrl-train's checks
    ({"replace": {"trainer.placement.policy_num_nodes": "trainer.placement.policy_num_nodes=1",
                  "generator.inference_engine_tensor_parallel_size":
                  "generator.inference_engine_tensor_parallel_size=1"}}, "policy placement 1x8"),
    # skyrl-train's validate_cfg: colocated engines must fill the policy's GPUs
    ({"replace": {"generator.num_inference_engines": "generator.num_inference_engines=4"}}, "num_rollout_gpus"),
    ({"replace": {"generator.max_turns": "generator.max_turns=4"}}, "max_turns"),
    ({"add": ["generator.step_wise_trajectories=true"]}, "step_wise_trajectories"),
    ({"replace": {"trainer.algorithm.advantage_estimator": "trainer.algorithm.advantage_estimator=gem_rebnn"}},
     "gem_rebnn"),  # skyrl-train's validate_cfg: not in the estimator registry
    ({"replace": {"trainer.policy_mini_batch_size": "trainer.policy_mini_batch_size=96"}}, ""),  # batch sizes
])
def test_a_broken_recipe_fails_the_dry_run(gem_skyrl, tmp_path, change, message):
    path = variant(tmp_path, "game_rebn_qwen3_4b_2nodes", **change)
    with pytest.raises((SystemExit, AssertionError, ValueError)) as err:
        gem_skyrl.dry_run(path)
    assert message in str(err.value)
