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

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from gem_envs_games.base import Outcome, TurnGame, at_least, bounded_int

_DIGITS = re.compile(r"^[\s,\[\]()]*\d+(?:[\s,]+\d+)*[\s,\[\]()]*$")


def score(code: Sequence[int], guess: Sequence[int]) -> tuple[int, int]:
    """``(black, white)`` pegs: right digit in the right place / in the wrong place.

    >>> score([1, 2, 3, 4], [1, 3, 2, 6])
    (1, 2)
    """
    black = sum(c == g for c, g in zip(code, guess))
    common = sum((Counter(code) & Counter(guess)).values())
    return black, common - black


def parse_code(text: str, code_length: int, num_numbers: int) -> list[int] | None:
    """The digits of a guess (``"1 2 3"``, ``"1,2,3"``, ``"[1, 2, 3]"``, or ``"123"``
    when every digit is a single one), or None when the box holds no digits.

    >>> parse_code("[1, 2, 3]", 3, 6), parse_code("123", 3, 6), parse_code("one", 3, 6)
    ([1, 2, 3], [1, 2, 3], None)
    """
    if not _DIGITS.match(text):
        return None
    numbers = re.findall(r"\d+", text)
    if len(numbers) == 1 and len(numbers[0]) == code_length > 1 and num_numbers <= 9:
        numbers = list(numbers[0])
    return [bounded_int(n) for n in numbers]


class MastermindEnv(TurnGame):
    """Guess a ``code_length``-digit code over digits 1..``num_numbers``.

    With ``code_length`` or ``num_numbers`` None (GEM's random preset) every episode
    draws 2-4 positions and up to 8 digits, with ``10 * (code_length - 1)`` turns
    unless ``max_turns`` is given: as many as the fixed presets allow for their sizes,
    far more than a consistent-guess strategy needs.
    """

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
        self.best_black = 0

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
        self.best_black = 0
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

    def play(self, guess: list[int]) -> Outcome:
        shown = " ".join(map(str, guess)) if len(guess) <= 2 * self.code_length else f"{len(guess)} numbers"
        if len(guess) != self.code_length:
            return Outcome(f"{shown} has {len(guess)} digits, the code has {self.code_length}; the turn is lost.")
        if any(not 1 <= d <= self.num_numbers for d in guess):
            return Outcome(f"{shown} uses digits outside 1-{self.num_numbers}; the turn is lost.")
        if guess in self.guesses:
            return Outcome(f"you already guessed {shown}; the turn is lost.")
        self.guesses.append(guess)
        black, white = score(self.code, guess)
        reward = 0.0
        if black > self.best_black:
            reward = (black - self.best_black) / self.code_length
            self.best_black = black
        if black == self.code_length:
            return Outcome.win(f"{shown} is the code! You win.", reward)
        return Outcome(f"{shown} -> {black} black, {white} white.", reward)

    def task_suffix(self) -> str:
        return f"{self.turns_left_text()} Enter your next guess." if self.turn else "Enter your first guess."

    def last_turn_note(self) -> str:
        return f" That was your last turn: the code was {' '.join(map(str, self.code))}."

    def sample_random_action(self) -> str:
        digits = range(1, self.num_numbers + 1)
        if self.duplicate_numbers or self.num_numbers < self.code_length:
            guess = [self.rng.choice(digits) for _ in range(self.code_length)]
        else:
            guess = self.rng.sample(digits, self.code_length)
        return "\\boxed{" + " ".join(map(str, guess)) + "}"

    def game_state(self) -> dict[str, Any]:
        return {
            "code_length": self.code_length,
            "num_numbers": self.num_numbers,
            "code": list(self.code),
            "guesses": [list(g) for g in self.guesses],
            "best_black": self.best_black,
        }

    def load_game_state(self, state: dict[str, Any]) -> None:
        self.code_length, self.num_numbers = state["code_length"], state["num_numbers"]
        self.code = list(state["code"])
        self.guesses = [list(g) for g in state["guesses"]]
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
