"""Mastermind: find a secret code of digits from black/white peg feedback.

>>> env = MastermindEnv(code_length=2, num_numbers=6, max_turns=10)
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{1 2}")
>>> terminated
False

Rewards (GEM's): milestone credit ``(new best black pegs - old best) / code_length``
whenever a guess beats the best count of black pegs so far (so a solved code has
earned 1.0 in total), 0 for other and invalid guesses (wrong length, digits out of
range, repeats), -0.1 and the episode ends for a reply without digits in ``\\boxed{}``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import permutations
from operator import eq
from typing import Any

from gem_envs_games.base import GuessingGame, Outcome, at_least, bounded_int, reference_alias

_DIGITS = re.compile(r"^[\s,\[\]()]*\d+(?:[\s,]+\d+)*[\s,\[\]()]*$")
_NUMBER = re.compile(r"\d+")
#: random guesses are drawn from a table of every code when there are at most this many
_CODE_TABLE_LIMIT = 5040


def score(code: Sequence[int], guess: Sequence[int]) -> tuple[int, int]:
    """``(black, white)`` pegs: right digit in the right place / in the wrong place.

    >>> score([1, 2, 3, 4], [1, 3, 2, 6])
    (1, 2)
    """
    black = sum(map(eq, code, guess))
    digits = set(code)
    if len(digits) == len(code):
        # no digit repeats in the code (every preset): each digit in common counts once
        return black, len(digits.intersection(guess)) - black
    # digits in common, each as often as it is in both (codes are a few digits long:
    # counting is cheaper than building Counters)
    common = sum(min(code.count(d), guess.count(d)) for d in set(guess))
    return black, common - black


@lru_cache(maxsize=16)
def _distinct_codes(num_numbers: int, code_length: int) -> tuple[str, ...]:
    """Every code of distinct digits, as the action that guesses it."""
    return tuple(
        "\\boxed{" + " ".join(map(str, code)) + "}"
        for code in permutations(range(1, num_numbers + 1), code_length)
    )


def parse_code(text: str, code_length: int, num_numbers: int) -> list[int] | None:
    """The digits of a guess (``"1 2 3"``, ``"1,2,3"``, ``"[1, 2, 3]"``, or ``"123"``
    when every digit is a single one), or None when the box holds no digits.

    >>> parse_code("[1, 2, 3]", 3, 6), parse_code("123", 3, 6), parse_code("one", 3, 6)
    ([1, 2, 3], [1, 2, 3], None)
    """
    numbers = text.split()
    # the usual box, digits between spaces, is read without the grammar's regex
    if not (numbers and all(map(str.isdecimal, numbers))):
        if not _DIGITS.match(text):
            return None
        numbers = _NUMBER.findall(text)
    if len(numbers) == 1 and len(numbers[0]) == code_length > 1 and num_numbers <= 9:
        numbers = list(numbers[0])
    return [int(n) if len(n) <= 6 else bounded_int(n) for n in numbers]


class MastermindEnv(GuessingGame):
    """Guess a ``code_length``-digit code over digits 1..``num_numbers``.

    With ``code_length`` or ``num_numbers`` None (GEM's random preset) every episode
    draws 2-4 positions and up to 8 digits, with ``10 * (code_length - 1)`` turns
    unless ``max_turns`` is given: as many as the fixed presets allow for their sizes,
    far more than a consistent-guess strategy needs.
    """

    # the reference package's names for this game's state (gem_envs_games.base.reference_alias)
    game_code = reference_alias("code", list, list)
    milestone = reference_alias("best_black")  # the most black pegs one guess has earned so far

    @property
    def previous_guesses(self) -> set[tuple[int, ...]]:
        """The reference's name and type (a set of tuples) for ``guesses``."""
        return set(self._guessed)

    @previous_guesses.setter
    def previous_guesses(self, guesses: Any) -> None:
        self._set_guesses(guesses)

    format_error = "no digits found in \\boxed{}."

    def __init__(
        self,
        code_length: int | None = 4,
        num_numbers: int | None = 6,
        duplicate_numbers: bool = False,
        max_turns: int | None = 20,
    ) -> None:
        self._random = code_length is None or num_numbers is None
        if not self._random:
            if code_length < 1 or num_numbers < 1:
                raise ValueError("code_length and num_numbers must be at least 1")
            if not duplicate_numbers and num_numbers < code_length:
                raise ValueError(f"{num_numbers} digits cannot fill {code_length} distinct positions")
        at_least("max_turns", max_turns, 1)
        self.duplicate_numbers = bool(duplicate_numbers)
        self._max_turns_setting = max_turns
        self.code_length, self.num_numbers = (4, 6) if self._random else (code_length, num_numbers)
        self.max_turns = max_turns or 10 * max(1, self.code_length - 1)
        self.code: list[int] = []
        self.guesses: list[list[int]] = []
        self._guessed: set[tuple[int, ...]] = set()  # self.guesses, for membership tests
        self.best_black = 0
        self._codes: tuple[str, ...] | None = None  # _random_codes(), looked up by the first random action

    def new_episode(self) -> str:
        if self._random:
            self.code_length = self.rng.randint(2, 4)
            self.num_numbers = self.rng.randint(max(self.code_length, 4), 8)
            self.max_turns = self._max_turns_setting or 10 * (self.code_length - 1)
        digits = range(1, self.num_numbers + 1)
        if self.duplicate_numbers:
            self.code = [self.rng.choice(digits) for _ in range(self.code_length)]
        else:
            self.code = self.rng.sample(digits, self.code_length)
        self.guesses = []
        self._guessed = set()
        self.best_black = 0
        self._codes = None
        example = " ".join(str(d) for d in range(1, self.code_length + 1))
        return (
            "You are playing Mastermind.\n"
            f"Find the secret code of {self.code_length} digits, each from 1 to {self.num_numbers}; "
            f"digits {'may' if self.duplicate_numbers else 'never'} repeat within the code. "
            f"You have {self.max_turns} guesses.\n"
            "After each guess you get black and white pegs: a black peg is a right digit in the right "
            "position, a white peg a right digit in a wrong position.\n"
            "A guess of the wrong length, with digits out of range, or repeated wastes a turn.\n"
            f"Answer with the digits separated by spaces in \\boxed{{}}, e.g. \\boxed{{{example}}}. "
            "Anything without digits in \\boxed{} ends the game."
        )

    def parse_move(self, boxed: str) -> list[int] | None:
        return parse_code(boxed, self.code_length, self.num_numbers)

    def play(self, guess: list[int]) -> str | Outcome:
        shown = " ".join(map(str, guess)) if len(guess) <= 2 * self.code_length else f"{len(guess)} numbers"
        if len(guess) != self.code_length:
            return f"{shown} has {len(guess)} digits, the code has {self.code_length}; the turn is lost."
        if min(guess) < 1 or max(guess) > self.num_numbers:
            return f"{shown} uses digits outside 1-{self.num_numbers}; the turn is lost."
        key = tuple(guess)
        if key in self._guessed:
            return f"you already guessed {shown}; the turn is lost."
        self.guesses.append(guess)
        self._guessed.add(key)
        black, white = score(self.code, guess)
        reward = 0.0
        if black > self.best_black:
            reward = (black - self.best_black) / self.code_length
            self.best_black = black
        if black == self.code_length:
            return Outcome.win(f"{shown} is the code! You win.", reward)
        text = f"{shown} -> {black} black, {white} white."
        # a guess that earns nothing is plain feedback (what an Outcome of reward 0 means)
        return Outcome(text, reward) if reward else text

    def last_turn_note(self) -> str:
        return f" That was your last turn: the code was {' '.join(map(str, self.code))}."

    def audit_answers(self) -> tuple[str, None]:
        """``gem audit``'s right and wrong in-format answers (:mod:`gem.audit`): the secret code, and no wrong one,
        so that the audit's baseline stays random play. A wrong guess every turn would never win by luck where
        random guesses sometimes do, and every strategy built from random guesses would "beat" it."""
        return "\\boxed{" + " ".join(map(str, self.code)) + "}", None

    def sample_random_action(self) -> str:
        codes = self._codes
        if codes is None:  # looked up once per episode: the sizes are fixed within one
            codes = self._codes = self._random_codes()
        if codes:
            return self.rng.choice(codes)
        digits = range(1, self.num_numbers + 1)
        if self.duplicate_numbers or self.num_numbers < self.code_length:
            guess = [self.rng.choice(digits) for _ in range(self.code_length)]
        else:
            guess = self.rng.sample(digits, self.code_length)
        return "\\boxed{" + " ".join(map(str, guess)) + "}"

    def _random_codes(self) -> tuple[str, ...]:
        """Every code random actions draw from, or ``()`` where they draw digit by digit
        (codes with repeats, or too many codes for a table)."""
        if self.duplicate_numbers or self.num_numbers < self.code_length:
            return ()
        if math.perm(self.num_numbers, self.code_length) > _CODE_TABLE_LIMIT:
            return ()
        # one draw from every code: the same distribution as sample(), at a fraction of its cost
        return _distinct_codes(self.num_numbers, self.code_length)

    def game_state(self) -> dict[str, Any]:
        return {
            "code_length": self.code_length,
            "num_numbers": self.num_numbers,
            "code": list(self.code),
            "guesses": [list(g) for g in self.guesses],
            "best_black": self.best_black,
        }

    def _set_guesses(self, guesses: Any) -> None:
        # the list and the set used for repeat checks change together (assigning only one let a repeat pass)
        self.guesses = [list(g) for g in guesses]
        self._guessed = set(map(tuple, self.guesses))

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.code_length, self.num_numbers = state["code_length"], state["num_numbers"]
        self._codes = None
        self.code = list(state["code"])
        self._set_guesses(state["guesses"])
        self.best_black = state["best_black"]


def register(registry: Any) -> None:
    """Register GEM's Mastermind ids."""
    entry = "gem_envs_games.mastermind:MastermindEnv"
    registry.register("game:Mastermind-v0", entry)  # bare id: the constructor defaults, as in GEM
    registry.register(
        "game:Mastermind-v0-easy", entry, code_length=2, num_numbers=6, max_turns=10, duplicate_numbers=False
    )
    registry.register(
        "game:Mastermind-v0-hard", entry, code_length=4, num_numbers=8, max_turns=30, duplicate_numbers=False
    )
    registry.register(
        "game:Mastermind-v0-random", entry, code_length=None, num_numbers=None, max_turns=None, duplicate_numbers=False
    )
