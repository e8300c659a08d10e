"""``check_multiagent_env``: ``check_env`` for a multi-agent game, from every seat.

A :class:`~gem.multiagent.MultiAgentEnv` is checked through its single-agent views: each
seat in turn is played by ``check_env``'s random and adversarial actions while every
scripted player the game offers takes the other seats, so every agent's parsing, every
opponent and the game's state and seeding all go through the same conformance check.

>>> check_multiagent_env("gem_envs_multi.tictactoe:TicTacToe")   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from gem.multiagent.env import MultiAgentEnv
from gem.multiagent.opponent import OpponentEnv
from gem.registry import load_entry_point
from gem.testing.check import check_env


def check_multiagent_env(game: str | type | MultiAgentEnv, *, players: tuple[str, ...] | None = None,
                         **check_kwargs: Any) -> None:
    """Run :func:`gem.testing.check_env` on ``game`` from every seat against each scripted player
    (``players``, default all the game's); raises :class:`~gem.testing.CheckEnvError` naming the seat."""
    template = game if isinstance(game, MultiAgentEnv) else (
        load_entry_point(game, "check_multiagent_env") if isinstance(game, str) else game)()
    for seat in template.possible_agents:
        for player in players or template.scripted_players:
            subject = template.spawn() if isinstance(game, MultiAgentEnv) else game
            env = OpponentEnv(subject, opponent=player, seat=seat)
            try:
                check_env(env, **check_kwargs)
            except AssertionError as exc:
                raise type(exc)(f"seat {seat!r} against scripted {player!r}: {exc}") from exc
