"""Reference-package scripts on the games: its README loop, its module paths for the game
classes, ``seed=`` at construction, and its vector-env test, written as its users write them."""

from __future__ import annotations

import importlib

import pytest

import gem
from gem.compat import rows
from gem.utils.debug import run_and_print_episode_with_random_selection
from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

GAME_PATHS = [path for path in rows() if path.startswith("gem.envs.game_env.")]
GAME_IDS = gem.list_envs("game:*")


@pytest.mark.parametrize("path", GAME_PATHS)
def test_the_reference_game_modules_give_our_classes(path):
    module = importlib.import_module(path)
    for name in rows()[path]:
        cls = getattr(module, name)
        assert cls.__module__.startswith("gem_envs_games.") and issubclass(cls, gem.Env)


def test_the_reference_readme_loop(capsys):
    gem.print_envs()
    env = gem.make("game:GuessTheNumber-v0")
    observation, info = env.reset()
    for _ in range(100):
        action = env.sample_random_action()
        observation, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert terminated or truncated
    assert "game:GuessTheNumber-v0" in capsys.readouterr().out


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_a_constructor_seed_makes_the_first_reset_reproducible(env_id):
    first = gem.make(env_id, seed=11)
    second = gem.make(env_id, seed=11)
    assert first.reset() == second.reset()
    action = first.sample_random_action()
    assert first.step(action)[:4] == second.step(action)[:4]


def test_the_reference_vector_game_test(capsys):
    num_envs = 3
    wrapper_fn = WRAPPER_FACTORY["concat"]
    ta_vec_env = gem.make_vec(
        ["game:GuessTheNumber-v0-easy", "game:Sokoban-v0-easy", "game:Game2048-v0-easy"],
        wrappers=[wrapper_fn],
        max_turns=3,
        async_mode=True,
    )
    run_and_print_episode_with_random_selection(
        ta_vec_env,
        lambda _: [ta_vec_env.envs[i].env.sample_random_action() for i in range(num_envs)],
        ignore_done=True,
        max_steps=5,
    )
    ta_vec_env.close()
    assert "Step 5" in capsys.readouterr().out


def test_vec_kwargs_seeds_as_the_training_examples_pass_them():
    envs = gem.make_vec(["game:Mastermind-v0-easy"] * 2, vec_kwargs=[{"seed": 4}, {"seed": 4}])
    obs, infos = envs.reset()
    assert obs[0] == obs[1] and envs.get_state()[0] == envs.get_state()[1]
    envs.close()


def test_a_game_class_built_directly_from_its_reference_path():
    from gem.envs.game_env.guess_the_number import GuessTheNumberEnv

    env = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=4, seed=2)
    twin = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=4, seed=2)
    assert env.reset() == twin.reset() and env.get_state() == twin.get_state()


def test_a_new_env_registered_the_reference_way(gem_registry):
    from gem.core import Env
    from gem.envs.registration import ENV_REGISTRY, register
    from gem.utils.constants import TERMINAL_STATE
    from gem.utils.parsing import extract_last_boxed_answer

    class ReverseStringEnv(Env):
        def __init__(self, str_len: int = 5):
            super().__init__()
            self.str_len = str_len

        def reset(self, seed=None):
            super().reset(seed)
            self.gt_str = "".join(self.rng.choices("abcdef", k=self.str_len))
            return f"Please reverse the string: {self.gt_str}.", {}

        def step(self, action):
            clean_action = extract_last_boxed_answer(action)
            reward = 0.0 if clean_action is None else float(clean_action[::-1] == self.gt_str)
            return TERMINAL_STATE, reward, True, True, {}

    register("game:ReverseString-compat-test", ReverseStringEnv)
    assert "game:ReverseString-compat-test" in ENV_REGISTRY
    env = gem.make("game:ReverseString-compat-test", seed=1)
    env.reset()
    assert env.step("\\boxed{" + env.gt_str[::-1] + "}")[1] == 1.0


def test_a_typo_of_an_installed_suites_id_is_not_told_to_install_it():
    import subprocess
    import sys
    from pathlib import Path

    gem_cli = str(Path(sys.executable).parent / "gem")
    info = subprocess.run([gem_cli, "info", "game:Sodoku-v0"], capture_output=True, text=True, timeout=60)
    assert info.returncode == 1
    assert "Did you mean 'game:Sudoku-v0'" in info.stderr and "pip install" not in info.stderr
