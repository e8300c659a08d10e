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

import gem
from gem_envs_games import words
from gem_envs_games.parsing import extract_boxed

_LETTERS = re.compile(r"^\s*([A-Za-z]+)\s*$")
_NO_EPISODE = "No episode is running: call reset() to start one."


def turns_for(word_length: int) -> int:
    """Turns the random preset allows for a word length (3 -> 10 and 7 -> 20, as GEM's
    easy and hard presets; never fewer than the 26 letters could need).

    >>> [turns_for(n) for n in (3, 5, 7)]
    [10, 15, 20]
    """
    return min(26, round(10 + 2.5 * (word_length - 3)))


class HangmanEnv(gem.Env):
    """Guess a ``word_length``-letter word within ``max_turns`` turns.

    Secrets are common English words; ``hardcore`` draws from a five times larger pool
    (:func:`gem_envs_games.words.secret_words`). With ``word_length`` None (GEM's random
    preset) every episode draws 3-6 letters and, unless ``max_turns`` is given,
    :func:`turns_for` turns.
    """

    def __init__(self, word_length: int | None = 5, hardcore: bool = False, max_turns: int | None = 20) -> None:
        self._random = word_length is None
        if not self._random and not 3 <= word_length <= 10:
            raise ValueError(f"word_length must be 3..10, got {word_length}")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.hardcore = bool(hardcore)
        self._max_turns_setting = max_turns
        self.word_length = 5 if self._random else word_length
        self.max_turns = max_turns or turns_for(self.word_length)
        self.secret = ""
        self.guessed: list[str] = []  # letters, in the order guessed
        self.turn = 0
        self.done = True

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        if self._random:
            self.word_length = self.rng.randint(3, 6)
            self.max_turns = self._max_turns_setting or turns_for(self.word_length)
        self.secret = self.rng.choice(words.secret_words(self.word_length, self.hardcore)).upper()
        self.guessed = []
        self.turn = 0
        self.done = False
        rules = (
            "You are playing Hangman.\n"
            f"Find the secret {self.word_length}-letter English word within {self.max_turns} turns. "
            "Each turn, guess one letter or the whole word.\n"
            "A letter in the word is uncovered everywhere it occurs; guessing the whole word right wins "
            "at once. A repeated letter or a word of the wrong length wastes a turn.\n"
            "Answer in \\boxed{}: \\boxed{E} guesses the letter E; a whole word in the box guesses the word. "
            "Anything without letters in \\boxed{} ends the game."
        )
        return f"{rules}\n\n{self._board_text()}", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return _NO_EPISODE, 0.0, True, False, {}
        self.turn += 1
        boxed = extract_boxed(action)
        match = _LETTERS.match(boxed) if boxed is not None else None
        if match is None:
            self.done = True
            feedback = f"Turn {self.turn}: no letter or word found in \\boxed{{}}. The game is over."
            return feedback, -0.1, True, self.turn >= self.max_turns, {"correct": False}
        guess = match.group(1).upper()
        shown = guess if len(guess) <= 20 else guess[:20] + "..."
        reward = 0.0
        if len(guess) > 1:
            if guess == self.secret:
                hidden = sum(ch not in self.guessed for ch in self.secret)
                self.guessed.extend(sorted(set(self.secret) - set(self.guessed)))
                self.done = True
                text = f"Turn {self.turn}: {guess} is the word! You win.\n\n{self._render()}"
                return text, 0.5 * hidden / self.word_length + 0.5, True, False, {"correct": True}
            if len(guess) != self.word_length:
                feedback = (
                    f"Turn {self.turn}: {shown} has {len(guess)} letters, the word has {self.word_length}; "
                    "the turn is lost."
                )
            else:
                feedback = f"Turn {self.turn}: {guess} is not the word."
        elif guess in self.guessed:
            feedback = f"Turn {self.turn}: you already guessed {guess}; the turn is lost."
        else:
            self.guessed.append(guess)
            found = self.secret.count(guess)
            if found:
                reward = 0.5 * found / self.word_length
                feedback = f"Turn {self.turn}: {guess} is in the word ({found}x)."
                if all(ch in self.guessed for ch in self.secret):
                    self.done = True
                    text = f"{feedback} The word is {self.secret}. You win!\n\n{self._render()}"
                    return text, reward + 0.5, True, False, {"correct": True}
            else:
                feedback = f"Turn {self.turn}: {guess} is not in the word."
        if self.turn >= self.max_turns:
            self.done = True
            text = f"{feedback} That was your last turn: the word was {self.secret}."
            return text, reward, True, True, {"correct": False}
        return f"{feedback}\n\n{self._board_text()}", reward, False, False, {}

    def _render(self) -> str:
        return " ".join(ch if ch in self.guessed else "_" for ch in self.secret)

    def _board_text(self) -> str:
        tried = " ".join(self.guessed) or "none"
        left = self.max_turns - self.turn
        return f"Word: {self._render()}\nLetters tried: {tried}\nTurns left: {left}. Enter your guess."

    def sample_random_action(self) -> str:
        if self.rng.random() < 0.1:
            return f"\\boxed{{{self.rng.choice(words.secret_words(self.word_length, self.hardcore)).upper()}}}"
        return f"\\boxed{{{self.rng.choice(string.ascii_uppercase)}}}"

    def get_state(self) -> dict[str, Any]:
        return {
            "word_length": self.word_length,
            "max_turns": self.max_turns,
            "secret": self.secret,
            "guessed": list(self.guessed),
            "turn": self.turn,
            "done": self.done,
            "rng": self.rng_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.word_length, self.max_turns = state["word_length"], state["max_turns"]
        self.secret, self.guessed = state["secret"], list(state["guessed"])
        self.turn, self.done = state["turn"], state["done"]
        self.set_rng_state(state["rng"])


def register(registry: Any) -> None:
    """Register GEM's Hangman ids."""
    entry = "gem_envs_games.hangman:HangmanEnv"
    registry.register("game:Hangman-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register("game:Hangman-v0-easy", entry, word_length=3, hardcore=False, max_turns=10)
    registry.register("game:Hangman-v0-hard", entry, word_length=7, hardcore=False, max_turns=20)
    registry.register("game:Hangman-v0-random", entry, word_length=None, hardcore=False, max_turns=None)
