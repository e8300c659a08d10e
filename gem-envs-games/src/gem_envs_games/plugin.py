"""Registers every game's ids with gem-core (entry point ``gem = games``)."""

from __future__ import annotations

from importlib import import_module

import gem

#: one module per game family; each defines ``register(registry)``
GAME_MODULES = (
    "guess_the_number",
    "mastermind",
    "minesweeper",
    "wordle",
    "hangman",
    "crosswords",
    "word_search",
    "fifteen_puzzle",
    "sudoku",
    "tower_of_hanoi",
    "game2048",
    "sokoban",
    "wikigame",
)


@gem.hookimpl
def gem_register_envs(registry):
    for name in GAME_MODULES:
        import_module(f"gem_envs_games.{name}").register(registry)
