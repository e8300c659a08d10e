"""Seeds fix episodes, and get_state/set_state (through JSON) resume them exactly,
for every word and logic game id; the solvers' moves drive the episodes so that the states are
deep inside real games."""

from __future__ import annotations

import json

import pytest

import gem
from gem_envs_games.solvers import solver_for

FAMILIES = ("GuessTheNumber", "Mastermind", "Minesweeper", "Wordle", "Hangman", "Crosswords", "WordSearch")
IDS = sorted(i for i in gem.list_envs("game:") if i.split(":")[1].split("-v")[0] in FAMILIES)


def _play(env, seed: int | None, max_steps: int = 200) -> list:
    """Observations, rewards and infos of one episode played by the solver."""
    solver = solver_for(env)
    solver.reset()
    obs, info = env.reset(seed=seed)
    trace = [(obs, info)]
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = env.step(solver.act(obs, info))
        trace.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return trace


@pytest.mark.parametrize("env_id", IDS)
def test_seed_fixes_the_episode(env_id):
    env = gem.make(env_id)
    assert _play(env, 7) == _play(env, 7) == _play(gem.make(env_id), 7)
    puzzles = set()
    for seed in range(8):
        env.reset(seed=seed)
        puzzles.add(json.dumps({k: v for k, v in env.get_state().items() if k != "rng"}))
    assert len(puzzles) > 1


@pytest.mark.parametrize("env_id", IDS)
def test_reset_without_seed_continues_the_stream(env_id):
    a, b = gem.make(env_id), gem.make(env_id)
    a.reset(seed=3)
    b.reset(seed=3)
    assert [_play(a, None) for _ in range(3)] == [_play(b, None) for _ in range(3)]


@pytest.mark.parametrize("env_id", IDS)
def test_state_round_trip_mid_episode(env_id):
    env = gem.make(env_id)
    solver = solver_for(env)
    solver.reset()
    obs, info = env.reset(seed=11)
    obs, *_, info = env.step(solver.act(obs, info))
    saved = json.loads(json.dumps(env.get_state()))

    def finish(target) -> list:
        moves = solver_for(target)
        moves.reset()
        rest, current, current_info = [], obs, info
        while True:
            current, reward, terminated, truncated, current_info = target.step(moves.act(current, current_info))
            rest.append((current, reward, terminated, truncated, current_info))
            if terminated or truncated:
                return [*rest, target.get_state()]

    expected = finish(env)
    env.set_state(saved)
    assert finish(env) == expected
    fresh = gem.make(env_id)
    fresh.set_state(saved)
    assert finish(fresh) == expected
    env.set_state(saved)
    assert finish(env.spawn(same_state=True)) == expected


@pytest.mark.parametrize("env_id", IDS)
def test_random_actions_do_not_change_the_puzzle(env_id):
    """Sampling random actions uses the env's RNG but never alters the running game."""
    a, b = gem.make(env_id), gem.make(env_id)
    a.reset(seed=5)
    b.reset(seed=5)
    for _ in range(10):
        a.sample_random_action()
    action = b.sample_random_action()
    assert a.step(action) == b.step(action)
