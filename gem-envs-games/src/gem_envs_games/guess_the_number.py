"""Guess the Number: find a secret integer from "higher" / "lower" hints.

>>> env = GuessTheNumberEnv(min_number=1, max_number=10, max_turns=4)
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{5}")
>>> reward, terminated
(0.0, False)

Rewards (GEM's): 1.0 for the right number, 0 for other guesses and for invalid
ones (outside the range, repeated), -0.1 and the episode ends for a reply without a
whole number in ``\\boxed{}``. When the turns run out, the last reward is the
closeness of the last valid guess: ``1 - |guess - secret| / (max - min)``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import gem
from gem_envs_games.parsing import extract_boxed

_INTEGER = re.compile(r"^\s*([+-]?\d+)\s*$")
#: longer digit strings are out of any range; int() of them is slow or refused
_MAX_DIGITS = 18
_NO_EPISODE = "No episode is running: call reset() to start one."


def parse_guess(text: str) -> int | None:
    """The integer in the box, or None if it is not a whole number.

    >>> parse_guess(" 42 "), parse_guess("4.5"), parse_guess("-3")
    (42, None, -3)
    """
    match = _INTEGER.match(text)
    if match is None:
        return None
    digits = match.group(1)
    if len(digits.lstrip("+-")) > _MAX_DIGITS:
        return -(10**_MAX_DIGITS) if digits.startswith("-") else 10**_MAX_DIGITS
    return int(digits)


class GuessTheNumberEnv(gem.Env):
    """Guess an integer in ``[min_number, max_number]`` within ``max_turns`` guesses.

    With ``min_number`` or ``max_number`` None (GEM's random preset) every episode draws
    the range 1..N with N in 2..100 and ``ceil(sqrt(N - 1)) + 1`` turns, which always
    leaves room for a binary search.
    """

    def __init__(self, min_number: int | None = 1, max_number: int | None = 20, max_turns: int | None = 20) -> None:
        self._random = min_number is None or max_number is None
        if not self._random and max_number <= min_number:
            raise ValueError(f"max_number ({max_number}) must be greater than min_number ({min_number})")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self._max_turns_setting = max_turns
        self.min_number, self.max_number = (1, 20) if self._random else (min_number, max_number)
        self.max_turns = max_turns or self._turns_for(self.min_number, self.max_number)
        self.secret = self.min_number
        self.guesses: list[int] = []
        self.turn = 0
        self.done = True

    @staticmethod
    def _turns_for(low: int, high: int) -> int:
        return math.ceil(math.sqrt(high - low)) + 1

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        if self._random:
            self.min_number, self.max_number = 1, self.rng.randint(2, 100)
        if self._random or self._max_turns_setting is None:
            self.max_turns = self._max_turns_setting or self._turns_for(self.min_number, self.max_number)
        self.secret = self.rng.randint(self.min_number, self.max_number)
        self.guesses = []
        self.turn = 0
        self.done = False
        rules = (
            "You are playing Guess the Number.\n"
            f"I am thinking of a whole number between {self.min_number} and {self.max_number} (inclusive). "
            f"You have {self.max_turns} guesses. After each guess I say whether the number is higher or lower.\n"
            "Guessing outside the range or repeating a guess wastes a turn.\n"
            "Answer with your guess in \\boxed{}, e.g. \\boxed{"
            f"{(self.min_number + self.max_number) // 2}"
            "}. Anything without a whole number in \\boxed{} ends the game."
        )
        return f"{rules}\n\nEnter your first guess.", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return _NO_EPISODE, 0.0, True, False, {}
        self.turn += 1
        boxed = extract_boxed(action)
        guess = parse_guess(boxed) if boxed is not None else None
        if guess is None:
            self.done = True
            feedback = f"Turn {self.turn}: no whole number found in \\boxed{{}}. The game is over."
            return feedback, -0.1, True, self.turn >= self.max_turns, {"correct": False}
        if not self.min_number <= guess <= self.max_number:
            feedback = f"Turn {self.turn}: {guess} is outside {self.min_number}-{self.max_number}; the turn is lost."
        elif guess in self.guesses:
            feedback = f"Turn {self.turn}: you already guessed {guess}; the turn is lost."
        elif guess == self.secret:
            self.guesses.append(guess)
            self.done = True
            return f"Turn {self.turn}: {guess} is correct! You win.", 1.0, True, False, {"correct": True}
        else:
            self.guesses.append(guess)
            hint = "higher" if self.secret > guess else "lower"
            feedback = f"Turn {self.turn}: you guessed {guess}. The number is {hint} than {guess}."
        if self.turn >= self.max_turns:
            self.done = True
            reward = 0.0
            if self.guesses:
                reward = 1.0 - abs(self.guesses[-1] - self.secret) / (self.max_number - self.min_number)
            feedback += f" That was your last turn: the number was {self.secret}."
            return feedback, reward, True, True, {"correct": False}
        left = self.max_turns - self.turn
        return f"{feedback} {left} turn{'s' if left != 1 else ''} left.", 0.0, False, False, {}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(self.min_number, self.max_number)}}}"

    def get_state(self) -> dict[str, Any]:
        return {
            "min_number": self.min_number,
            "max_number": self.max_number,
            "max_turns": self.max_turns,
            "secret": self.secret,
            "guesses": list(self.guesses),
            "turn": self.turn,
            "done": self.done,
            "rng": self.rng_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.min_number, self.max_number = state["min_number"], state["max_number"]
        self.max_turns, self.secret = state["max_turns"], state["secret"]
        self.guesses = list(state["guesses"])
        self.turn, self.done = state["turn"], state["done"]
        self.set_rng_state(state["rng"])


def register(registry: Any) -> None:
    """Register GEM's Guess the Number ids."""
    entry = "gem_envs_games.guess_the_number:GuessTheNumberEnv"
    registry.register("game:GuessTheNumber-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register("game:GuessTheNumber-v0-easy", entry, min_number=1, max_number=10, max_turns=4)
    registry.register("game:GuessTheNumber-v0-hard", entry, min_number=1, max_number=50, max_turns=7)
    registry.register("game:GuessTheNumber-v0-random", entry, min_number=None, max_number=None, max_turns=None)
