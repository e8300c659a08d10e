"""Every multi: id passes check_env, from every seat, against every scripted opponent."""

from __future__ import annotations

import pytest

import gem
from gem.multiagent import check_multiagent_env, make_game
from gem.testing import check_env

IDS = gem.list_envs("multi:")
GAMES = sorted({gem.spec(i).kwargs["game"] for i in IDS})


def test_the_suite_registers_its_games():
    assert {"multi:TicTacToe-v0", "multi:Bargaining-v0", "multi:Signalling-v0", "multi:PrisonersDilemma-v0"} <= set(IDS)


@pytest.mark.parametrize("env_id", IDS)
def test_check_env(env_id):
    check_env(gem.make(env_id))


@pytest.mark.parametrize("game", GAMES)
def test_every_seat_against_every_scripted_player(game):
    check_multiagent_env(game, num_random_strings=20, skip=("async",))


def test_make_game_gives_the_multi_agent_env():
    game = make_game("multi:TicTacToe-v0")
    obs, _ = game.reset(seed=0)
    assert set(obs) == {"x", "o"} and game.active_agents == ["x"] and game.env_id == "multi:TicTacToe-v0"


def test_random_seat():
    env = gem.make("multi:TicTacToe-v0", seat="random")
    seats = {env.reset(seed=s)[1]["seat"] for s in range(20)}
    assert seats == {"x", "o"}
