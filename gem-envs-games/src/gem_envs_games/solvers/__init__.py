"""Scripted policies that play each game through its text interface.

>>> env = gem.make("game:TowerofHanoi-v0-easy")            # doctest: +SKIP
>>> solver = solver_for(env)                                # doctest: +SKIP
>>> obs, info = env.reset(seed=0); solver.reset()           # doctest: +SKIP
>>> obs, reward, terminated, truncated, info = env.step(solver.act(obs, info))  # doctest: +SKIP

A solver sees what the agent sees (the observation, then ``info["suffix"]`` with the
board) plus the env's public configuration (board size, number range, turn limit),
never its hidden state. Given text alone (``act(text)``), it reads the board from that
text: a history wrapper's observation ends with the suffix, so it holds the board.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any, Protocol

#: game family (the name part of ``game:Family-v0-preset``) -> solver module
SOLVER_MODULES = {
    "GuessTheNumber": "guess_the_number",
    "Mastermind": "mastermind",
    "Minesweeper": "minesweeper",
    "Wordle": "wordle",
    "Hangman": "hangman",
    "Crosswords": "crosswords",
    "WordSearch": "word_search",
    "FifteenPuzzle": "fifteen_puzzle",
    "Sudoku": "sudoku",
    "TowerofHanoi": "tower_of_hanoi",
    "Game2048": "game2048",
    "Sokoban": "sokoban",
    "WikiGame": "wikigame",
}


class Solver(Protocol):
    def reset(self) -> None:
        """Forget the previous episode."""

    def act(self, observation: str, info: Mapping[str, Any] | None = None) -> str:
        """The next action, in the env's action format (``\\boxed{...}``)."""


def seen(observation: str, info: Mapping[str, Any] | None) -> str:
    """What the agent is shown: the observation, then ``info["suffix"]`` (the board and
    the prompt) when there is one.

    >>> seen("Turn 1: moved up.", {"suffix": "Board: ..."})
    'Turn 1: moved up.\\nBoard: ...'
    """
    suffix = info.get("suffix") if info else None
    return f"{observation}\n{suffix}" if suffix else observation


def solver_for(env: Any) -> Solver:
    """A solver for ``env`` (an env made from a ``game:`` id, possibly wrapped)."""
    base = env.unwrapped
    env_id = base.env_id or ""
    family = env_id.split(":", 1)[-1].split("-v")[0]
    if family not in SOLVER_MODULES:
        raise KeyError(f"no solver for {env_id!r}; solvers exist for: {', '.join(SOLVER_MODULES)}")
    module = import_module(f"gem_envs_games.solvers.{SOLVER_MODULES[family]}")
    return module.Solver(base)
