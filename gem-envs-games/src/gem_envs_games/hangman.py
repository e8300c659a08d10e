"""Hangman: uncover a secret word one letter at a time, or guess it whole.

>>> env = HangmanEnv(word_length=3, max_turns=10)
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{E}")
>>> terminated
False

Rewards (GEM's): a letter in the word earns ``0.5 * (positions it fills) / word_length``;
winning earns another 0.5 -- when the last letter is uncovered, or when the whole word
is guessed (which also credits the letters still hidden), so a win is worth 1.0 in
total. Absent letters and wrong words earn 0, as do invalid guesses (a repeated
letter, a word of the wrong length); a reply without letters in ``\\boxed{}`` ends
the episode with -0.1. Only the turn limit bounds the game: there are no lives.
"""

from __future__ import annotations

import re
import string
from typing import Any

from gem_envs_games import words
from gem_envs_games.base import Outcome, TurnGame, at_least, reference_alias

_LETTERS = re.compile(r"^\s*([A-Za-z]+)\s*$")


def turns_for(word_length: int) -> int:
    """Turns the random preset allows for a word length (3 -> 10 and 7 -> 20, as GEM's
    easy and hard presets; never fewer than the 26 letters could need).

    >>> [turns_for(n) for n in (3, 5, 7)]
    [10, 15, 20]
    """
    return min(26, round(10 + 2.5 * (word_length - 3)))


class HangmanEnv(TurnGame):
    """Guess a ``word_length``-letter word within ``max_turns`` turns.

    Secrets are common English words; ``hardcore`` draws from a five times larger pool
    (:func:`gem_envs_games.words.secret_words`). With ``word_length`` None (GEM's random
    preset) every episode draws 3-6 letters and, unless ``max_turns`` is given,
    :func:`turns_for` turns.
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    secret_word = reference_alias("secret")
    guessed_letters = reference_alias("guessed", set, list)
    #: the secrets this episode's word was drawn from (lower case; a copy)
    available_words = property(lambda self: list(words.secret_words(self.word_length, self.hardcore)))

    @property
    def board(self) -> list[str]:
        """The word as the player sees it, the reference's way: one entry per letter, ``"_"`` until guessed."""
        guessed = self.guessed
        return [ch if ch in guessed else "_" for ch in self.secret]

    format_error = "no letter or word found in \\boxed{}."

    def __init__(self, word_length: int | None = 5, hardcore: bool = False, max_turns: int | None = 20) -> None:
        self._random = word_length is None
        if not self._random and not 3 <= word_length <= 10:
            raise ValueError(f"word_length must be 3..10, got {word_length}")
        at_least("max_turns", max_turns, 1)
        self.hardcore = bool(hardcore)
        self._max_turns_setting = max_turns
        self.word_length = 5 if self._random else word_length
        self.max_turns = max_turns or turns_for(self.word_length)
        self.secret = ""
        self.guessed: list[str] = []  # letters, in the order guessed

    def new_episode(self) -> str:
        if self._random:
            self.word_length = self.rng.randint(3, 6)
            self.max_turns = self._max_turns_setting or turns_for(self.word_length)
        self.secret = self.rng.choice(words.secret_words(self.word_length, self.hardcore)).upper()
        self.guessed = []
        return (
            "You are playing Hangman.\n"
            f"Find the secret {self.word_length}-letter English word within {self.max_turns} turns. "
            "Each turn, guess one letter or the whole word.\n"
            "A letter in the word is uncovered everywhere it occurs; guessing the whole word right wins "
            "at once. A repeated letter or a word of the wrong length wastes a turn.\n"
            "Answer in \\boxed{}: \\boxed{E} guesses the letter E; a whole word in the box guesses the word. "
            "Anything without letters in \\boxed{} ends the game."
        )

    def parse_move(self, boxed: str) -> str | None:
        match = _LETTERS.match(boxed)
        return match.group(1).upper() if match else None

    def play(self, guess: str) -> str | Outcome:
        if len(guess) > 1:
            if guess == self.secret:
                hidden = sum(ch not in self.guessed for ch in self.secret)
                self.guessed.extend(sorted(set(self.secret) - set(self.guessed)))
                text = f"{guess} is the word! You win.\n\n{self._render()}"
                return Outcome.win(text, 0.5 * hidden / self.word_length + 0.5)
            if len(guess) != self.word_length:
                shown = guess if len(guess) <= 20 else guess[:20] + "..."
                return f"{shown} has {len(guess)} letters, the word has {self.word_length}; the turn is lost."
            return f"{guess} is not the word."
        if guess in self.guessed:
            return f"you already guessed {guess}; the turn is lost."
        self.guessed.append(guess)
        found = self.secret.count(guess)
        if not found:
            return f"{guess} is not in the word."
        reward = 0.5 * found / self.word_length
        feedback = f"{guess} is in the word ({found}x)."
        if all(ch in self.guessed for ch in self.secret):
            return Outcome.win(f"{feedback} The word is {self.secret}. You win!\n\n{self._render()}", reward + 0.5)
        return Outcome(feedback, reward)

    def last_turn_note(self) -> str:
        return f" That was your last turn: the word was {self.secret}."

    def _render(self) -> str:
        return " ".join(self.board)

    def task_suffix(self) -> str:
        tried = " ".join(self.guessed) or "none"
        return f"Word: {self._render()}\nLetters tried: {tried}\nTurns left: {self.turns_left}. Enter your guess."

    def audit_answers(self) -> tuple[str, None]:
        """``gem audit``'s right and wrong in-format answers (:mod:`gem.audit`): the secret word, and no wrong one,
        so that the audit's baseline stays random play. A wrong guess every turn would never win by luck where
        random guesses sometimes do, and every strategy built from random guesses would "beat" it."""
        return f"\\boxed{{{self.secret}}}", None

    def sample_random_action(self) -> str:
        if self.rng.random() < 0.1:
            return f"\\boxed{{{self.rng.choice(words.secret_words(self.word_length, self.hardcore)).upper()}}}"
        return f"\\boxed{{{self.rng.choice(string.ascii_uppercase)}}}"

    def game_state(self) -> dict[str, Any]:
        return {"word_length": self.word_length, "secret": self.secret, "guessed": list(self.guessed)}

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.word_length, self.secret, self.guessed = state["word_length"], state["secret"], list(state["guessed"])


def register(registry: Any) -> None:
    """Register GEM's Hangman ids."""
    entry = "gem_envs_games.hangman:HangmanEnv"
    registry.register("game:Hangman-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register("game:Hangman-v0-easy", entry, word_length=3, hardcore=False, max_turns=10)
    registry.register("game:Hangman-v0-hard", entry, word_length=7, hardcore=False, max_turns=20)
    registry.register("game:Hangman-v0-random", entry, word_length=None, hardcore=False, max_turns=None)
