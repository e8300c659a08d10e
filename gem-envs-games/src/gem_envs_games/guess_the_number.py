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
from functools import lru_cache
from typing import Any

from gem_envs_games.base import GuessingGame, Outcome, at_least, bounded_int, reference_alias

_INTEGER = re.compile(r"^\s*([+-]?)(\d+)\s*$")
#: longer numbers are out of any range (read as +-10**18)
_MAX_DIGITS = 18


def parse_guess(text: str) -> int | None:
    """The integer in the box, or None if it is not a whole number.

    >>> parse_guess(" 42 "), parse_guess("4.5"), parse_guess("-3")
    (42, None, -3)
    """
    if text.isdecimal() and len(text) <= _MAX_DIGITS:  # the usual box: just the digits
        return int(text)
    match = _INTEGER.match(text)
    if match is None:
        return None
    sign, digits = match.groups()
    value = int(digits) if len(digits) <= _MAX_DIGITS else bounded_int(digits, _MAX_DIGITS)
    return -value if sign == "-" else value


@lru_cache(maxsize=128)
def _actions(low: int, high: int) -> tuple[str, ...]:
    """``\\boxed{n}`` for every n in ``low..high``."""
    return tuple(f"\\boxed{{{n}}}" for n in range(low, high + 1))


@lru_cache(maxsize=128)
def _rules(low: int, high: int, max_turns: int) -> str:
    """The rules shown at reset (built once per range: resets are frequent)."""
    return (
        "You are playing Guess the Number.\n"
        f"I am thinking of a whole number between {low} and {high} (inclusive). "
        f"You have {max_turns} guesses. After each guess I say whether the number is higher or lower.\n"
        "Guessing outside the range or repeating a guess wastes a turn.\n"
        "Answer with your guess in \\boxed{}, e.g. \\boxed{"
        f"{(low + high) // 2}"
        "}. Anything without a whole number in \\boxed{} ends the game."
    )


class GuessTheNumberEnv(GuessingGame):
    """Guess an integer in ``[min_number, max_number]`` within ``max_turns`` guesses.

    With ``min_number`` or ``max_number`` None (GEM's random preset) every episode draws
    the range 1..N with N in 2..100 and ``ceil(sqrt(N - 1)) + 1`` turns, which always
    leaves room for a binary search.
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    game_number = reference_alias("secret")
    previous_guesses = reference_alias("guesses", set, list)

    format_error = "no whole number found in \\boxed{}."

    def __init__(self, min_number: int | None = 1, max_number: int | None = 20, max_turns: int | None = 20) -> None:
        self._random = min_number is None or max_number is None
        if not self._random and max_number <= min_number:
            raise ValueError(f"max_number ({max_number}) must be greater than min_number ({min_number})")
        at_least("max_turns", max_turns, 1)
        self._max_turns_setting = max_turns
        self.min_number, self.max_number = (1, 20) if self._random else (min_number, max_number)
        self.max_turns = max_turns or self._turns_for(self.min_number, self.max_number)
        self.secret = self.min_number
        self.guesses: list[int] = []
        self._action_table: tuple[str, ...] | None = None  # built by the first random action

    @staticmethod
    def _turns_for(low: int, high: int) -> int:
        return math.ceil(math.sqrt(high - low)) + 1

    def new_episode(self) -> str:
        if self._random:
            self.min_number, self.max_number = 1, self.rng.randint(2, 100)
        if self._random or self._max_turns_setting is None:
            self.max_turns = self._max_turns_setting or self._turns_for(self.min_number, self.max_number)
        self.secret = self.rng.randint(self.min_number, self.max_number)
        self.guesses = []
        self._action_table = None
        return _rules(self.min_number, self.max_number, self.max_turns)

    parse_move = staticmethod(parse_guess)

    def play(self, guess: int) -> str | Outcome:
        if not self.min_number <= guess <= self.max_number:
            return f"{guess} is outside {self.min_number}-{self.max_number}; the turn is lost."
        if guess in self.guesses:
            return f"you already guessed {guess}; the turn is lost."
        self.guesses.append(guess)
        if guess == self.secret:
            return Outcome.win(f"{guess} is correct! You win.")
        hint = "higher" if self.secret > guess else "lower"
        return f"you guessed {guess}. The number is {hint} than {guess}."

    def last_turn_note(self) -> str:
        return f" That was your last turn: the number was {self.secret}."

    def partial_credit(self) -> float:
        """Closeness of the last valid guess."""
        if not self.guesses:
            return 0.0
        return 1.0 - abs(self.guesses[-1] - self.secret) / (self.max_number - self.min_number)

    def audit_answers(self) -> tuple[str, None]:
        """``gem audit``'s right and wrong in-format answers (:mod:`gem.audit`): the secret number, and no wrong one,
        so that the audit's baseline stays random play. A wrong guess every turn would never win by luck where
        random guesses sometimes do, and every strategy built from random guesses would "beat" it."""
        return f"\\boxed{{{self.secret}}}", None

    def sample_random_action(self) -> str:
        # choice() over the range's actions draws exactly what randint() would, without
        # its argument checks and the formatting
        table = self._action_table
        if table is None:  # looked up once per episode: the range is fixed within one
            table = self._action_table = _actions(self.min_number, self.max_number)
        return self.rng.choice(table)

    def game_state(self) -> dict[str, Any]:
        return {
            "min_number": self.min_number,
            "max_number": self.max_number,
            "secret": self.secret,
            "guesses": list(self.guesses),
        }

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.min_number, self.max_number = state["min_number"], state["max_number"]
        self._action_table = None
        self.secret, self.guesses = state["secret"], list(state["guesses"])


def register(registry: Any) -> None:
    """Register GEM's Guess the Number ids."""
    entry = "gem_envs_games.guess_the_number:GuessTheNumberEnv"
    registry.register("game:GuessTheNumber-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register("game:GuessTheNumber-v0-easy", entry, min_number=1, max_number=10, max_turns=4)
    registry.register("game:GuessTheNumber-v0-hard", entry, min_number=1, max_number=50, max_turns=7)
    registry.register("game:GuessTheNumber-v0-random", entry, min_number=None, max_number=None, max_turns=None)
