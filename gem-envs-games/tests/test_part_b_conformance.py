"""Every part-B id (puzzles: sliding tiles, Sudoku, Hanoi, 2048, Sokoban) follows the
GEM Env contract: registration, check_env, seeded replay, state round trips."""

from __future__ import annotations

import json

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


def _play(env, seed, actions):
    obs, info = env.reset(seed=seed)
    trace = [(obs, info["suffix"])]
    for _ in range(actions):
        obs, reward, terminated, truncated, info = env.step(env.sample_random_action())
        trace.append((obs, reward, terminated, truncated, info["suffix"]))
        if terminated or truncated:
            break
    return trace


@pytest.mark.parametrize("env_id", IDS)
def test_seeded_reset_replays_the_episode_and_seeds_differ(env_id):
    env = gem.make(env_id)
    assert _play(env, 7, 30) == _play(gem.make(env_id), 7, 30)
    starts = {_play(env, seed, 0)[0] for seed in range(6)}
    # Tower of Hanoi has one starting position per disk count
    fixed_start = env_id.startswith("game:TowerofHanoi") and not env_id.endswith("random")
    assert len(starts) == 1 if fixed_start else len(starts) > 1


@pytest.mark.parametrize("env_id", IDS)
def test_state_round_trip_mid_episode(env_id):
    env = gem.make(env_id)
    env.reset(seed=3)
    for _ in range(3):
        if env.step(env.sample_random_action())[2]:
            env.reset(seed=4)
    state = json.loads(json.dumps(env.get_state()))
    later = [env.step(env.sample_random_action()) for _ in range(4)]
    other = gem.make(env_id)
    other.set_state(state)
    assert [other.step(other.sample_random_action()) for _ in range(4)] == later
    twin = env.spawn()
    twin.set_state(state)
    assert twin.get_state() == state


@pytest.mark.parametrize("env_id", IDS)
def test_rules_and_board_come_first_and_a_bad_reply_ends_the_episode(env_id):
    env = gem.make(env_id)
    obs, info = env.reset(seed=1)
    assert "\\boxed{" in obs and "turns" in obs
    obs, reward, terminated, truncated, info = env.step("I have no idea")
    assert (reward, terminated, info["correct"]) == (-0.1, True, False)
    obs, reward, terminated, *_ = env.step("\\boxed{up}")
    assert terminated and reward == 0.0 and "reset()" in obs


@pytest.mark.parametrize("env_id", IDS)
def test_sampling_random_actions_leaves_the_game_draws_alone(env_id):
    family = env_id.split(":")[1].split("-v")[0]
    move = {"TowerofHanoi": "\\boxed{A C}", "Sudoku": "\\boxed{1 1 1}"}.get(family, "\\boxed{up}")

    def episode(sample: bool):
        env = gem.make(env_id)
        trace = [env.reset(seed=11)[0]]
        for _ in range(3):
            if sample:
                env.sample_random_action()
            trace.append(env.step(move))
        trace.append(env.reset()[0])  # the env's own stream continues into the next episode
        return trace

    assert episode(sample=True) == episode(sample=False)
