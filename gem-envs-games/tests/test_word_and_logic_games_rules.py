"""Game rules and GEM's reward shapes for the word and logic games, checked on hand-made moves."""

from __future__ import annotations

import doctest
import importlib
import re

import pytest

import gem
from gem_envs_games import words
from gem_envs_games.board import parse_grid
from gem_envs_games.crosswords import BLACK, CrosswordsEnv
from gem_envs_games.guess_the_number import GuessTheNumberEnv
from gem_envs_games.hangman import HangmanEnv
from gem_envs_games.mastermind import MastermindEnv
from gem_envs_games.minesweeper import MINE, MinesweeperEnv
from gem_envs_games.word_search import WordSearchEnv, occurrences
from gem_envs_games.wordle import WordleEnv, feedback

MODULES = [
    "board", "words", "guess_the_number", "mastermind", "minesweeper", "wordle", "hangman", "crosswords",
    "word_search", "solvers.guess_the_number", "solvers.mastermind", "solvers.minesweeper", "solvers.wordle",
    "solvers.hangman", "solvers.crosswords", "solvers.word_search",
]


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(f"gem_envs_games.{module}"))
    assert result.failed == 0


@pytest.mark.parametrize(
    "env",
    [
        GuessTheNumberEnv(1, 10, 4),
        MastermindEnv(2, 6, False, 10),
        MinesweeperEnv(5, 5, 5, 25),
        WordleEnv(5, True, 25),
        HangmanEnv(5, False, 20),
        CrosswordsEnv(False, 30, 3),
        WordSearchEnv(False, 20, 5),
    ],
    ids=lambda env: type(env).__name__,
)
@pytest.mark.parametrize("reply", ["I pick 5", "\\boxed{?!}", "\\boxed{"])
def test_a_reply_without_a_move_is_a_format_error_that_ends_the_episode(env, reply):
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(reply)
    assert (reward, terminated, truncated) == (-0.1, True, False)
    assert "game is over" in obs


# -- Guess the Number -------------------------------------------------------------------
def test_guess_the_number_hints_invalid_moves_and_win():
    env = GuessTheNumberEnv(1, 10, 4)
    env.reset(seed=0)
    secret = env.secret
    low = 1 if secret != 1 else 2
    obs, reward, *_ = env.step(f"\\boxed{{{low}}}")
    assert reward == 0.0 and ("higher" if secret > low else "lower") in obs
    assert env.step("\\boxed{11}")[1:3] == (0.0, False)  # out of range
    assert env.step(f"\\boxed{{{low}}}")[1:3] == (0.0, False)  # repeated
    assert env.step(f"\\boxed{{{secret}}}")[1:4] == (1.0, True, False)


def test_guess_the_number_pays_closeness_when_time_runs_out():
    env = GuessTheNumberEnv(1, 50, 2)
    env.reset(seed=1)
    env.secret = 40
    env.step("\\boxed{10}")
    _, reward, terminated, truncated, _ = env.step("\\boxed{30}")
    assert (terminated, truncated) == (True, True)
    assert reward == pytest.approx(1 - 10 / 49)
    env.reset(seed=1)
    env.step("\\boxed{999}")  # never a valid guess: no closeness to pay
    assert env.step("\\boxed{-5}")[1] == 0.0


def test_guess_the_number_random_preset_leaves_room_for_binary_search():
    env = GuessTheNumberEnv(None, None, None)
    for seed in range(50):
        env.reset(seed=seed)
        span = env.max_number - env.min_number + 1
        assert 2**env.max_turns > span  # ceil(log2(span + 1)) <= max_turns


# -- Mastermind -------------------------------------------------------------------------
def test_mastermind_milestones_add_up_to_one():
    env = MastermindEnv(4, 8, False, 30)
    env.reset(seed=2)
    code = env.code
    wrong = [d for d in range(1, 9) if d not in code]
    assert env.step("\\boxed{" + " ".join(map(str, wrong)) + "}")[1] == 0.0
    half = code[:2] + wrong[:2]
    assert env.step("\\boxed{" + " ".join(map(str, half)) + "}")[1] == pytest.approx(0.5)
    assert env.step("\\boxed{" + " ".join(map(str, half)) + "}")[1] == 0.0  # repeated: invalid
    _, reward, terminated, _, info = env.step("\\boxed{" + ",".join(map(str, code)) + "}")
    assert (reward, terminated, info["correct"]) == (pytest.approx(0.5), True, True)


def test_mastermind_invalid_guesses_cost_a_turn_and_nothing_else():
    env = MastermindEnv(2, 6, False, 10)
    env.reset(seed=0)
    for guess in ("1 2 3", "7 1", "0 1"):
        obs, reward, terminated, _, _ = env.step(f"\\boxed{{{guess}}}")
        assert (reward, terminated) == (0.0, False) and "turn is lost" in obs
    assert env.turn == 3


# -- Minesweeper ------------------------------------------------------------------------
def test_minesweeper_first_reveal_is_safe_and_rewards_sum_to_one():
    for seed in range(20):
        env = MinesweeperEnv(5, 5, 5, 25)
        env.reset(seed=seed)
        obs, reward, terminated, *_ = env.step("\\boxed{reveal 0 0}")
        assert not terminated and reward > 0
        assert sum(row.count(MINE) for row in env.counts) == 5
        total = reward
        for r in range(5):
            for c in range(5):
                if env.counts[r][c] != MINE and not env.revealed[r][c]:
                    _, reward, terminated, _, info = env.step(f"\\boxed{{reveal {r} {c}}}")
                    total += reward
        assert terminated and info["correct"] and total == pytest.approx(1.0)


@pytest.mark.parametrize("preset", ["easy", "hard", "random"])
def test_minesweeper_presets_leave_a_turn_for_every_safe_cell(preset):
    env = gem.make(f"game:Minesweeper-v0-{preset}")
    for seed in range(20):
        env.reset(seed=seed)
        assert env.rows * env.cols - env.num_mines <= env.max_turns


def test_minesweeper_mine_flag_and_invalid_moves():
    env = MinesweeperEnv(5, 5, 5, 25)
    env.reset(seed=3)
    env.step("\\boxed{reveal 2 2}")
    mine = next((r, c) for r in range(5) for c in range(5) if env.counts[r][c] == MINE)
    assert env.step(f"\\boxed{{flag {mine[0]} {mine[1]}}}")[1:3] == (0.0, False)
    assert "F" in parse_grid(env.step("\\boxed{reveal 2 2}")[4]["suffix"])[mine[0]][mine[1]]  # already revealed
    assert env.step(f"\\boxed{{reveal {mine[0]} {mine[1]}}}")[1:3] == (0.0, False)  # flagged
    assert env.step("\\boxed{dig 1 1}")[1:3] == (0.0, False)
    assert env.step("\\boxed{reveal 9 9}")[1:3] == (0.0, False)
    env.step(f"\\boxed{{flag {mine[0]} {mine[1]}}}")
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{reveal {mine[0]} {mine[1]}}}")
    assert (reward, terminated, truncated, info["correct"]) == (0.0, True, False, False)
    assert "*" in obs


def test_minesweeper_layout_depends_only_on_seed_and_first_reveal():
    a, b = MinesweeperEnv(8, 8, 12, 64), MinesweeperEnv(8, 8, 12, 64)
    a.reset(seed=9)
    b.reset(seed=9)
    for _ in range(5):
        b.step(b.sample_random_action().replace("reveal", "flag"))
    b.flags = [[False] * 8 for _ in range(8)]
    a.step("\\boxed{reveal 4 4}")
    b.step("\\boxed{reveal 4 4}")
    assert a.mines == b.mines


# -- Wordle -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "secret, guess, marks",
    [
        ("CRANE", "CRANE", "GGGGG"),
        ("APPLE", "PAPAL", "YYGXY"),  # the second P is green, so the first is only yellow
        ("ABBEY", "BABES", "YYGGX"),
        ("SPEED", "EERIE", "YYXXX"),  # SPEED has two Es: the third E of EERIE is grey
    ],
)
def test_wordle_feedback(secret, guess, marks):
    assert feedback(secret, guess) == marks


def test_wordle_feedback_matches_the_rule_on_random_words():
    # Wordle's rule spelled out: greens first; then, left to right, a letter is yellow while the
    # secret's non-green letters still hold one more of it
    import collections
    import random

    def rule(secret, guess):
        marks = ["G" if s == g else "X" for s, g in zip(secret, guess)]
        left = collections.Counter(s for s, g in zip(secret, guess) if s != g)
        for i, g in enumerate(guess):
            if marks[i] != "G" and left[g] > 0:
                marks[i] = "Y"
                left[g] -= 1
        return "".join(marks)

    rng = random.Random(0)
    for _ in range(20000):
        length = rng.randint(1, 7)
        secret, guess = ("".join(rng.choice("ABCDE") for _ in range(length)) for _ in range(2))
        assert feedback(secret, guess) == rule(secret, guess), (secret, guess)


def test_wordle_rewards_new_greens_then_the_win():
    env = WordleEnv(5, True, 25)
    env.reset(seed=0)
    env.secret = "CRANE"
    assert env.step("\\boxed{CRATE}")[1] == pytest.approx(0.4)  # C R A E green
    assert env.step("\\boxed{TRACE}")[1] == 0.0  # no new green
    assert env.step("\\boxed{QQQQQ}")[1:3] == (0.0, False)  # not a word
    assert env.step("\\boxed{CRAN}")[1:3] == (0.0, False)  # wrong length
    _, reward, terminated, _, info = env.step("\\boxed{c r a n e}")
    assert (reward, terminated, info["correct"]) == (pytest.approx(0.6), True, True)


# -- Hangman ----------------------------------------------------------------------------
def test_hangman_letters_then_word_add_up_to_one():
    env = HangmanEnv(5, False, 20)
    env.reset(seed=0)
    env.secret = "APPLE"
    assert env.step("\\boxed{p}")[1] == pytest.approx(0.2)
    assert env.step("\\boxed{P}")[1:3] == (0.0, False)  # repeated letter
    assert env.step("\\boxed{Z}")[1] == 0.0
    assert env.step("\\boxed{APPLY}")[1:3] == (0.0, False)
    _, reward, terminated, _, info = env.step("\\boxed{apple}")
    assert (reward, terminated, info["correct"]) == (pytest.approx(0.8), True, True)


def test_hangman_uncovering_every_letter_wins():
    env = HangmanEnv(3, False, 10)
    env.reset(seed=0)
    env.secret = "CAT"
    rewards = [env.step(f"\\boxed{{{ch}}}")[1] for ch in "CA"]
    obs, reward, terminated, _, info = env.step("\\boxed{T}")
    assert terminated and info["correct"] and sum(rewards) + reward == pytest.approx(1.0)


# -- Crosswords -------------------------------------------------------------------------
@pytest.mark.parametrize("hardcore, max_turns", [(False, 30), (True, 40), (True, 20)])
def test_crossword_layouts_are_sound(hardcore, max_turns):
    env = CrosswordsEnv(hardcore, max_turns, 3)
    clues = dict(words.crossword_clues(hardcore))
    for seed in range(40):
        env.reset(seed=seed)
        cells = {(r, c) for r, c in env.letter_cells}
        assert len(cells) <= max_turns
        covered: dict[tuple[int, int], int] = {}
        for word, clue, row, col, direction in env.words:
            assert clues[word] == clue
            dr, dc = (0, 1) if direction == "across" else (1, 0)
            for i in range(len(word)):
                covered[(row + dr * i, col + dc * i)] = covered.get((row + dr * i, col + dc * i), 0) + 1
            for end in ((row - dr, col - dc), (row + dr * len(word), col + dc * len(word))):
                assert end not in cells  # no word runs on into another
        assert set(covered) == cells
        crossings = sum(n > 1 for n in covered.values())
        assert crossings >= len(env.words) - 1  # connected
        # every run of two or more letters in the grid is one of the words
        grid = env.solution
        runs = set()
        for lines in (grid, list(zip(*grid))):
            for line in lines:
                for run in "".join(line).split(BLACK):
                    if len(run) > 1:
                        runs.add(run)
        assert runs <= {w for w, *_ in env.words}


def test_crossword_moves():
    env = CrosswordsEnv(False, 30, 3)
    env.reset(seed=4)
    (r, c), letter = env.letter_cells[0], None
    letter = env.solution[r][c]
    wrong = "A" if letter != "A" else "B"
    black = next((i, j) for i, row in enumerate(env.solution) for j, ch in enumerate(row) if ch == BLACK)
    assert env.step(f"\\boxed{{{r} {c} {wrong}}}")[1] == 0.0
    assert env.step(f"\\boxed{{{black[0]} {black[1]} A}}")[1:3] == (0.0, False)
    assert env.step(f"\\boxed{{{r} {c} {letter.lower()}}}")[1] == pytest.approx(1 / len(env.letter_cells))
    assert env.step(f"\\boxed{{{r} {c} {letter}}}")[1:3] == (0.0, False)  # already filled
    assert env.step("\\boxed{99 99 A}")[1:3] == (0.0, False)


# -- Word Search ------------------------------------------------------------------------
@pytest.mark.parametrize("hardcore", [False, True])
def test_word_search_words_appear_exactly_once(hardcore):
    env = WordSearchEnv(hardcore, 20, 5)
    for seed in range(20):
        env.reset(seed=seed)
        for word, span in zip(env.targets, env.spans):
            assert occurrences(env.grid, word, backwards=True) == {tuple(tuple(end) for end in sorted(span))}


def test_word_search_guesses():
    env = WordSearchEnv(False, 20, 5)
    env.reset(seed=1)
    (r1, c1), (r2, c2) = env.spans[0]
    assert env.step(f"\\boxed{{{r2} {c2} {r1} {c1}}}")[1] == pytest.approx(0.2)  # either order
    assert env.step(f"\\boxed{{{r1} {c1} {r2} {c2}}}")[1:3] == (0.0, False)  # already found
    assert env.step("\\boxed{0 0 3 3}")[1:3] == (0.0, False)  # not straight
    assert env.step("\\boxed{0 0 0 99}")[1:3] == (0.0, False)  # off the grid
    assert "[" in env.step("\\boxed{0 0 0 0}")[4]["suffix"]  # found words are bracketed


# -- word lists -------------------------------------------------------------------------
def test_secret_words_are_common_dictionary_words():
    for length in range(3, 8):
        pool = words.secret_words(length)
        assert len(pool) > 300 and len(set(pool)) == len(pool)
        assert all(len(w) == length and w.isalpha() and w.islower() and words.is_real_word(w) for w in pool)
        assert set(pool) <= set(words.secret_words(length, hardcore=True))
    assert not {"sex", "rape", "bitch"} & set(words.secret_words(3) + words.secret_words(4) + words.secret_words(5))


def test_crossword_clues_identify_their_answers():
    for hardcore in (False, True):
        pairs = words.crossword_clues(hardcore)
        assert len(pairs) > 150
        assert len({(len(w), c) for w, c in pairs}) == len(pairs)
        assert all(w.isalpha() and w.isupper() and 3 <= len(w) <= 9 for w, _ in pairs)
        assert not any(re.search(rf"\b{w}", c, re.IGNORECASE) for w, c in pairs)  # no clue gives its answer
