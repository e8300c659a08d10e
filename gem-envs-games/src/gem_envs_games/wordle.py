"""Wordle: find a secret word from green / yellow / grey letter feedback.

>>> env = WordleEnv(word_length=5, max_turns=25)
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{crane}")
>>> terminated
False

Rewards (GEM's): each position that turns green for the first time earns
``0.5 / word_length``, and finding the word earns another 0.5 (1.0 in total). Invalid
guesses (wrong length, not a word when ``only_real_words``, repeated) earn 0; a reply
without letters in ``\\boxed{}`` ends the episode with -0.1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from gem_envs_games import words
from gem_envs_games.base import GuessingGame, Outcome, at_least, reference_alias

_LETTERS = re.compile(r"^\s*[A-Za-z]+(?:\s+[A-Za-z]+)*\s*$")
#: turns per letter when the random preset draws the word length (GEM's presets: 3 -> 15, 5 -> 25)
TURNS_PER_LETTER = 5


def feedback(secret: str, guess: str) -> str:
    """One mark per letter: ``G`` right place, ``Y`` in the word elsewhere, ``X`` absent.

    A letter guessed twice is marked Y at most as often as the secret still holds it
    after the greens (Wordle's rule).

    >>> feedback("APPLE", "PAPAL")
    'YYGXY'
    """
    if secret == guess:
        return "G" * len(guess)
    # the secret's letters that are not green, each usable once for a yellow (left to right)
    left = [s for s, g in zip(secret, guess) if s != g]
    marks = []
    for s, g in zip(secret, guess):
        if s == g:
            marks.append("G")
        elif g in left:
            left.remove(g)
            marks.append("Y")
        else:
            marks.append("X")
    for g in guess[len(marks):]:  # letters past the end of a shorter secret: yellow or grey
        if g in left:
            left.remove(g)
            marks.append("Y")
        else:
            marks.append("X")
    return "".join(marks)


def parse_word(text: str) -> str | None:
    """The upper-case letters in the box (spaces between letters are dropped), or None.

    >>> parse_word(" c r a n e "), parse_word("cr4ne")
    ('CRANE', None)
    """
    if text.isascii() and text.isalpha():  # one word as written: the common case
        return text.upper()
    if not _LETTERS.match(text):
        return None
    return "".join(text.split()).upper()


class WordleEnv(GuessingGame):
    """Find a ``word_length``-letter word within ``max_turns`` guesses.

    Secrets are common English words (:func:`gem_envs_games.words.secret_words`).
    With ``word_length`` None (GEM's random preset) every episode draws 3-6 letters and,
    unless ``max_turns`` is given, five turns per letter.
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    secret_word = reference_alias("secret")
    previous_guesses = reference_alias("guesses", set, list)
    #: per letter, 1 once a guess had it green (the reference's milestones; our greens as 0/1)
    milestones = reference_alias("greens", lambda greens: [int(g) for g in greens], lambda ms: [bool(m) for m in ms])
    #: the secrets this episode's word was drawn from (lower case; a copy)
    available_words = property(lambda self: list(words.secret_words(self.word_length)))

    format_error = "no word found in \\boxed{}."

    def __init__(self, word_length: int | None = 5, only_real_words: bool = True, max_turns: int | None = 20) -> None:
        self._random = word_length is None
        if not self._random and not 2 <= word_length <= 12:
            raise ValueError(f"word_length must be 2..12, got {word_length}")
        at_least("max_turns", max_turns, 1)
        self.only_real_words = bool(only_real_words)
        self._max_turns_setting = max_turns
        self.word_length = 5 if self._random else word_length
        self.max_turns = max_turns or TURNS_PER_LETTER * self.word_length
        self.secret = ""
        self.guesses: list[str] = []
        self.greens: list[bool] = []

    def new_episode(self) -> str:
        if self._random:
            self.word_length = self.rng.randint(3, 6)
            self.max_turns = self._max_turns_setting or TURNS_PER_LETTER * self.word_length
        self._look_up_lists()
        self.secret = self.rng.choice(self._pool).upper()
        self.guesses = []
        self.greens = [False] * self.word_length
        return (
            "You are playing Wordle.\n"
            f"Find the secret {self.word_length}-letter English word in {self.max_turns} guesses.\n"
            "After each guess every letter is marked:\n"
            "  G (green): right letter in the right position\n"
            "  Y (yellow): the letter is in the word, in another position\n"
            "  X (grey): the letter is not in the word (or not as many times as you used it)\n"
            + ("Guesses must be real English words. " if self.only_real_words else "")
            + "A guess of the wrong length or a repeated guess wastes a turn.\n"
            f"Answer with your word in \\boxed{{}}, e.g. \\boxed{{{self._example()}}}. "
            "Anything without letters in \\boxed{} ends the game."
        )

    def parse_move(self, boxed: str) -> str | None:
        return parse_word(boxed)

    def play(self, guess: str) -> str | Outcome:
        if len(guess) != self.word_length:
            shown = guess if len(guess) <= 20 else guess[:20] + "..."
            return f"{shown} has {len(guess)} letters, the word has {self.word_length}; the turn is lost."
        # parse_word gave ASCII letters: what words.is_real_word checks first
        if self.only_real_words and guess.lower() not in self._accepted:
            return f"{guess} is not in the word list; the turn is lost."
        if guess in self.guesses:
            return f"you already guessed {guess}; the turn is lost."
        self.guesses.append(guess)
        marks = feedback(self.secret, guess)
        reward = self._green_credit(marks)
        shown = " ".join(marks)
        if guess == self.secret:
            return Outcome.win(f"{guess} -> {shown}. You found the word!", reward + 0.5)
        # a guess that earns nothing is plain feedback (what an Outcome of reward 0 means)
        return Outcome(f"{guess} -> {shown}", reward) if reward else f"{guess} -> {shown}"

    def last_turn_note(self) -> str:
        return f"\nThat was your last turn: the word was {self.secret}."

    def _green_credit(self, marks: Sequence[str]) -> float:
        if "G" not in marks:  # most guesses: nothing to credit
            return 0.0
        greens, new = self.greens, 0
        for i, m in enumerate(marks):
            if m == "G" and not greens[i]:
                greens[i] = True
                new += 1
        return 0.5 * new / self.word_length

    def _example(self) -> str:
        """A common word other than the secret, to show the answer format."""
        pool = words.secret_words(self.word_length)
        return next(w for w in pool if w.upper() != self.secret).upper()

    def audit_answers(self) -> tuple[str, None]:
        """``gem audit``'s right and wrong in-format answers (:mod:`gem.audit`): the secret word, and no wrong one,
        so that the audit's baseline stays random play. A wrong guess every turn would never win by luck where
        random guesses sometimes do, and every strategy built from random guesses would "beat" it."""
        return f"\\boxed{{{self.secret}}}", None

    def sample_random_action(self) -> str:
        pool = self._pool if self.secret else words.secret_words(self.word_length)  # before the first reset
        return f"\\boxed{{{self.rng.choice(pool).upper()}}}"

    def game_state(self) -> dict[str, Any]:
        return {
            "word_length": self.word_length,
            "secret": self.secret,
            "guesses": list(self.guesses),
            "greens": list(self.greens),
        }

    def _look_up_lists(self) -> None:
        """This episode's word lists, looked up once (random actions and every guess use them)."""
        self._pool = words.secret_words(self.word_length)
        self._accepted = words.guess_words(self.word_length)

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.word_length, self.secret = state["word_length"], state["secret"]
        self._look_up_lists()
        self.guesses, self.greens = list(state["guesses"]), list(state["greens"])


def register(registry: Any) -> None:
    """Register GEM's Wordle ids."""
    entry = "gem_envs_games.wordle:WordleEnv"
    registry.register("game:Wordle-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register("game:Wordle-v0-easy", entry, word_length=3, only_real_words=True, max_turns=15)
    registry.register("game:Wordle-v0-hard", entry, word_length=5, only_real_words=True, max_turns=25)
    registry.register("game:Wordle-v0-random", entry, word_length=None, only_real_words=True, max_turns=None)
