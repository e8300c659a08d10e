"""Registers the ``multi:`` ids with gem-core (entry point ``gem = multi``).

Each id makes the single-agent view (:class:`gem.multiagent.OpponentEnv`): you play the
first seat against the game's default scripted opponent. ``gem.multiagent.make_game(id)``
gives the multi-agent game itself; ``opponent=``/``seat=`` choose others.
"""

from __future__ import annotations

import gem

OPPONENT_ENV = "gem.multiagent:OpponentEnv"

#: id -> the game class behind it
GAMES = {
    "multi:TicTacToe-v0": "gem_envs_multi.tictactoe:TicTacToe",
    "multi:Bargaining-v0": "gem_envs_multi.bargaining:Bargaining",
    "multi:Signalling-v0": "gem_envs_multi.signalling:Signalling",
    "multi:PrisonersDilemma-v0": "gem_envs_multi.prisoners_dilemma:PrisonersDilemma",
}


@gem.hookimpl
def gem_register_envs(registry):
    for env_id, game in GAMES.items():
        registry.register(env_id, OPPONENT_ENV, game=game)
    # the other seat: the listener, second mover or responder against the scripted first player
    registry.register("multi:TicTacToe-v0-o", OPPONENT_ENV, game=GAMES["multi:TicTacToe-v0"], seat="o")
    registry.register("multi:Signalling-v0-listener", OPPONENT_ENV, game=GAMES["multi:Signalling-v0"],
                      seat="listener")
    registry.register("multi:Bargaining-v0-second", OPPONENT_ENV, game=GAMES["multi:Bargaining-v0"],
                      seat="player_1")


@gem.hookimpl
def gem_register_provides(registry):
    # what this suite provides (gem.provides)
    registry.suite("multi")
