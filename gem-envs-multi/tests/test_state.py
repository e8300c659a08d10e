"""Seeds fix episodes and get_state/set_state (through JSON) resume them exactly, deep inside
games played by the scripted players."""

from __future__ import annotations

import json

import pytest

import gem
from gem.multiagent import make_game

IDS = gem.list_envs("multi:")


def _play(game, seed, player):
    obs, _ = game.reset(seed=seed)
    trace = [obs]
    while not game.done:
        trace.append(game.step({a: game.scripted_action(a, player) for a in game.active_agents}))
    return trace


@pytest.mark.parametrize("env_id", IDS)
def test_seeded_replay(env_id):
    game = make_game(env_id)
    player = game.default_opponent
    assert _play(game, 11, player) == _play(game, 11, player) == _play(make_game(env_id), 11, player)
    assert len({json.dumps(_play(game, s, "random")[0]) for s in range(8)}) > 1 or env_id.startswith(
        ("multi:PrisonersDilemma", "multi:TicTacToe"))


@pytest.mark.parametrize("env_id", IDS)
def test_state_round_trip_mid_game(env_id):
    game = make_game(env_id)
    for seed in range(5):
        game.reset(seed=seed)
        if not game.done:
            game.step({a: game.scripted_action(a, "random") for a in game.active_agents})
        if game.done:
            continue
        saved = json.loads(json.dumps(game.get_state()))
        rest = _continue(game)
        game.set_state(saved)
        assert _continue(game) == rest
        twin = make_game(env_id)
        twin.set_state(saved)
        assert _continue(twin) == rest


def _continue(game):
    out = []
    while not game.done:
        out.append(game.step({a: game.scripted_action(a, "random") for a in game.active_agents}))
    return out


@pytest.mark.parametrize("env_id", IDS)
def test_single_agent_view_state(env_id):
    env = gem.make(env_id)
    env.reset(seed=2)
    saved = json.loads(json.dumps(env.get_state()))
    first = [env.step(env.sample_random_action()) for _ in range(3)]
    env.set_state(saved)
    assert [env.step(env.sample_random_action()) for _ in range(3)] == first
