"""Every word and logic game id is registered as GEM registers it and
follows the GEM Env contract (``gem.testing.check_env``)."""

from __future__ import annotations

import pytest

import gem
from gem.testing import check_env

#: GEM's ids for these games and the settings each implies (random presets draw theirs;
#: a bare ``-v0`` id has the constructor's defaults, as in GEM)
EXPECTED = {
    "game:GuessTheNumber-v0": {"min_number": 1, "max_number": 20, "max_turns": 20},
    "game:Mastermind-v0": {"code_length": 4, "num_numbers": 6, "max_turns": 20, "duplicate_numbers": False},
    "game:Minesweeper-v0": {"rows": 8, "cols": 8, "num_mines": 10, "max_turns": 20},
    "game:Wordle-v0": {"word_length": 5, "only_real_words": True, "max_turns": 20},
    "game:Hangman-v0": {"word_length": 5, "hardcore": False, "max_turns": 20},
    "game:Crosswords-v0": {"hardcore": False, "max_turns": 100, "num_words": 5},
    "game:WordSearch-v0": {"hardcore": False, "max_turns": 20, "num_words": 5},
    "game:GuessTheNumber-v0-easy": {"min_number": 1, "max_number": 10, "max_turns": 4},
    "game:GuessTheNumber-v0-hard": {"min_number": 1, "max_number": 50, "max_turns": 7},
    "game:GuessTheNumber-v0-random": {},
    "game:Mastermind-v0-easy": {"code_length": 2, "num_numbers": 6, "max_turns": 10, "duplicate_numbers": False},
    "game:Mastermind-v0-hard": {"code_length": 4, "num_numbers": 8, "max_turns": 30, "duplicate_numbers": False},
    "game:Mastermind-v0-random": {"duplicate_numbers": False},
    "game:Minesweeper-v0-easy": {"rows": 5, "cols": 5, "num_mines": 5, "max_turns": 25},
    "game:Minesweeper-v0-hard": {"rows": 8, "cols": 8, "num_mines": 12, "max_turns": 64},
    "game:Minesweeper-v0-random": {},
    "game:Wordle-v0-easy": {"word_length": 3, "only_real_words": True, "max_turns": 15},
    "game:Wordle-v0-hard": {"word_length": 5, "only_real_words": True, "max_turns": 25},
    "game:Wordle-v0-random": {"only_real_words": True},
    "game:Hangman-v0-easy": {"word_length": 3, "hardcore": False, "max_turns": 10},
    "game:Hangman-v0-hard": {"word_length": 7, "hardcore": False, "max_turns": 20},
    "game:Hangman-v0-random": {"hardcore": False},
    "game:Crosswords-v0-easy": {"hardcore": False, "max_turns": 30, "num_words": 3},
    "game:Crosswords-v0-hard": {"hardcore": True, "max_turns": 40, "num_words": 3},
    "game:Crosswords-v0-random": {"max_turns": 20, "num_words": 3},
    "game:WordSearch-v0-easy": {"hardcore": False, "max_turns": 20, "num_words": 5},
    "game:WordSearch-v0-hard": {"hardcore": True, "max_turns": 20, "num_words": 5},
    "game:WordSearch-v0-random": {"max_turns": 20, "num_words": 5},
}
FAMILIES = ("GuessTheNumber", "Mastermind", "Minesweeper", "Wordle", "Hangman", "Crosswords", "WordSearch")


def test_every_gem_id_of_these_games_is_registered_and_nothing_else():
    ours = {i for i in gem.list_envs("game:") if i.split(":")[1].split("-v")[0] in FAMILIES}
    assert ours == set(EXPECTED)


@pytest.mark.parametrize("env_id", sorted(EXPECTED))
def test_presets_match_gem(env_id):
    env = gem.make(env_id)
    env.reset(seed=0)
    for name, value in EXPECTED[env_id].items():
        assert getattr(env, name) == value, name


@pytest.mark.parametrize("env_id", sorted(EXPECTED))
def test_check_env(env_id):
    check_env(gem.make(env_id), num_random_strings=100)


@pytest.mark.parametrize(
    "env_id, drawn",
    [
        ("game:GuessTheNumber-v0-random", ("max_number", "max_turns")),
        ("game:Mastermind-v0-random", ("code_length", "num_numbers", "max_turns")),
        ("game:Minesweeper-v0-random", ("rows", "num_mines", "max_turns")),
        ("game:Wordle-v0-random", ("word_length", "max_turns")),
        ("game:Hangman-v0-random", ("word_length", "max_turns")),
        ("game:Crosswords-v0-random", ("hardcore",)),
        ("game:WordSearch-v0-random", ("hardcore",)),
    ],
)
def test_random_presets_vary_per_episode(env_id, drawn):
    env = gem.make(env_id)
    settings = set()
    for seed in range(30):
        env.reset(seed=seed)
        settings.add(tuple(getattr(env, name) for name in drawn))
    assert len(settings) > 1


def test_overrides_reach_the_env():
    env = gem.make("game:Wordle-v0-easy", max_turns=3)
    env.reset(seed=0)
    for word in ("ZZZ", "QQQ", "XXX"):  # not words: invalid, but they use up turns
        *_, terminated, truncated, _ = env.step(f"\\boxed{{{word}}}")
    assert terminated and truncated
