"""Every puzzle id (sliding tiles, Sudoku, Hanoi, 2048, Sokoban) is registered as GEM
registers it and follows the GEM Env contract (``gem.testing.check_env``); a reply
without a move ends the episode."""

from __future__ import annotations

import pytest

import gem
from gem.testing import check_env

#: the ids GEM registers for these games, with the settings each one implies
EXPECTED = {
    "game:FifteenPuzzle-v0": {"num_rows": 2, "max_turns": 20},
    "game:FifteenPuzzle-v0-easy": {"num_rows": 2, "max_turns": 10},
    "game:FifteenPuzzle-v0-hard": {"num_rows": 4, "max_turns": 50},
    "game:FifteenPuzzle-v0-random": {},
    "game:Sudoku-v0": {"scale": 9, "clues": 30, "max_turns": 100},
    "game:Sudoku-v0-easy": {"scale": 4, "clues": 10, "max_turns": 15},
    "game:Sudoku-v0-hard": {"scale": 9, "clues": 50, "max_turns": 50},
    "game:Sudoku-v0-random": {},
    "game:TowerofHanoi-v0": {"num_disks": 3, "max_turns": 100},
    "game:TowerofHanoi-v0-easy": {"num_disks": 3, "max_turns": 10},
    "game:TowerofHanoi-v0-hard": {"num_disks": 5, "max_turns": 35},
    "game:TowerofHanoi-v0-random": {},
    "game:Game2048-v0": {"target_tile": 2048, "max_turns": 1000},
    "game:Game2048-v0-easy": {"target_tile": 64, "max_turns": 50},
    "game:Game2048-v0-hard": {"target_tile": 512, "max_turns": 50},
    "game:Game2048-v0-extreme-hard": {"target_tile": 2048, "max_turns": 100},
    "game:Game2048-v0-random": {},
    "game:Sokoban-v0": {"dim_room": (6, 6), "num_boxes": 3, "max_turns": 100},
    "game:Sokoban-v0-easy": {"dim_room": (6, 6), "num_boxes": 2, "max_turns": 20},
    "game:Sokoban-v0-hard": {"dim_room": (8, 8), "num_boxes": 4, "max_turns": 50},
    "game:Sokoban-v0-random": {},
}
IDS = sorted(EXPECTED)
FAMILIES = ("FifteenPuzzle", "Sudoku", "TowerofHanoi", "Game2048", "Sokoban")


def test_every_gem_id_of_these_games_is_registered_and_nothing_else():
    ours = {i for i in gem.list_envs("game:") if i.split(":")[1].split("-v")[0] in FAMILIES}
    assert ours == set(EXPECTED)


@pytest.mark.parametrize("env_id", IDS)
def test_presets_match_gem(env_id):
    env = gem.make(env_id)
    env.reset(seed=0)
    for name, value in EXPECTED[env_id].items():
        assert getattr(env, name) == value, name


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id):
    check_env(gem.make(env_id), num_random_strings=60)


@pytest.mark.parametrize("env_id", IDS)
def test_rules_and_board_come_first_and_a_bad_reply_ends_the_episode(env_id):
    env = gem.make(env_id)
    obs, info = env.reset(seed=1)
    assert "\\boxed{" in obs and "turns" in obs
    obs, reward, terminated, truncated, info = env.step("I have no idea")
    assert (reward, terminated, info["correct"]) == (-0.1, True, False)
    obs, reward, terminated, *_ = env.step("\\boxed{up}")
    assert terminated and reward == 0.0 and "reset()" in obs
