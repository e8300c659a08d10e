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


#: the reference package's module paths of the games (gem.compat) -> our class in this suite
_REFERENCE_PATHS = {
    "guess_the_number": "guess_the_number:GuessTheNumberEnv",
    "mastermind": "mastermind:MastermindEnv",
    "minesweeper": "minesweeper:MinesweeperEnv",
    "wordle": "wordle:WordleEnv",
    "hangman": "hangman:HangmanEnv",
    "word_search": "word_search:WordSearchEnv",
    "fifteen_puzzle": "fifteen_puzzle:FifteenPuzzleEnv",
    "sudoku": "sudoku:SudokuEnv",
    "tower_of_hanoi": "tower_of_hanoi:TowerofHanoiEnv",
    "game_2048": "game2048:Game2048Env",
    "crosswords": "crosswords:CrosswordsEnv",
    "crosswords.crosswords": "crosswords:CrosswordsEnv",
    "sokoban": "sokoban:SokobanEnv",
    "sokoban.sokoban": "sokoban:SokobanEnv",
    "wikigame": "wikigame:WikiGameEnv",
    "wikigame.wikigame": "wikigame:WikiGameEnv",
}


@gem.hookimpl
def gem_register_compat(registry):
    for path, target in _REFERENCE_PATHS.items():
        registry.register(f"gem.envs.game_env.{path}", {target.rpartition(":")[2]: f"gem_envs_games.{target}"})


@gem.hookimpl
def gem_register_provides(registry):
    # what an install without this suite is told to pip install for (gem.provides)
    registry.suite("game")
    registry.reference_path("gem.envs.game_env")
