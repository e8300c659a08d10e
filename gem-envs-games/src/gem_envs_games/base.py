"""The turn-game flow every game here shares, so each game only states its rules.

A game subclasses :class:`TurnGame` and fills in hooks; the base runs the episode:

- ``reset`` seeds, calls :meth:`TurnGame.new_episode` (draw the puzzle, return the rules)
  and returns the rules as the observation;
- ``step`` refuses to run without an episode, counts the turn, reads the move from the
  last ``\\boxed{}`` (:meth:`TurnGame.parse_move`; no box or an unreadable move is a
  format error: -0.1, ``info["format_error"]`` and the episode ends), plays it (:meth:`TurnGame.play`), and at the
  turn limit ends the episode with :meth:`TurnGame.last_turn_note` and
  :meth:`TurnGame.partial_credit`;
- ``get_state`` / ``set_state`` keep ``max_turns``, ``turn``, ``done`` and the RNG streams
  around the game's own fields (:meth:`TurnGame.game_state`, :meth:`TurnGame.load_game_state`).

The observation is what just happened (the rules at reset, ``Turn N: <feedback>`` after a
move); the current board and the prompt for the next move go to ``info["suffix"]``
(:meth:`TurnGame.task_suffix`), as in the reference package, so a history wrapper shows
every move's feedback once and the board only as it is now. Once the episode is over the
suffix is empty (there is no next move to ask for).

``play`` returns the feedback text for a move that earns nothing and leaves the game
running, and an :class:`Outcome` otherwise.

>>> class Coin(TurnGame):
...     format_error = "no side found in \\\\boxed{}."
...     max_turns = 2
...     def new_episode(self):
...         self.side = self.rng.choice("HT")
...         return "Call the coin: \\\\boxed{H} or \\\\boxed{T}."
...     def parse_move(self, boxed):
...         return boxed.strip().upper() if boxed.strip().upper() in ("H", "T") else None
...     def play(self, move):
...         return Outcome.win("right! You win.") if move == self.side else "wrong."
...     def task_suffix(self):
...         return f"Turns left: {self.turns_left}. Call it."
>>> env = Coin()
>>> env.reset(seed=0)[1]
{'suffix': 'Turns left: 2. Call it.'}
>>> wrong = "T" if env.side == "H" else "H"
>>> env.step(f"\\\\boxed{{{wrong}}}")
('Turn 1: wrong.', 0.0, False, False, {'suffix': 'Turns left: 1. Call it.', 'format_error': False})
>>> env.step("no box")[1:]
(-0.1, True, True, {'suffix': '', 'correct': False, 'format_error': True})
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

import gem
from gem.conventions import FORMAT_ERROR, FORMAT_ERROR_REWARD
from gem.parsing import last_boxed

NO_EPISODE = "No episode is running: call reset() to start one."


def reference_alias(attribute: str, to_reference: Callable[[Any], Any] | None = None,
                    from_reference: Callable[[Any], Any] | None = None) -> property:
    """A property under the reference package's name for state a game keeps as ``attribute``: scripts and
    tests written against the reference read (and, where they assign, write) it by that name, with the
    reference's type (``to_reference``; ``from_reference`` converts an assigned value back). Never a second
    copy of the state."""

    def read(self: Any) -> Any:
        value = getattr(self, attribute)
        return to_reference(value) if to_reference is not None else value

    def write(self: Any, value: Any) -> None:
        setattr(self, attribute, from_reference(value) if from_reference is not None else value)

    return property(read, write, doc=f"the reference's name for ``{attribute}``")


class Outcome(NamedTuple):
    """What one valid move did: the text after ``Turn N:``, its reward, and whether it
    ended the game before the turn limit (``over``) with a win (``won``).

    A named tuple rather than a dataclass: one is built on every step, and a tuple is
    the cheapest object Python builds."""

    text: str
    reward: float = 0.0
    over: bool = False
    won: bool = False

    @classmethod
    def win(cls, text: str, reward: float = 1.0) -> Outcome:
        """The move won the game."""
        return cls(text, reward, True, True)

    @classmethod
    def loss(cls, text: str, reward: float = 0.0) -> Outcome:
        """The move lost the game before the turn limit (a mine, a locked board)."""
        return cls(text, reward, True, False)


def bounded_int(digits: str, max_digits: int = 6) -> int:
    """``int(digits)`` for a string of decimal digits, or ``10 ** max_digits`` when it
    has more significant digits than that: such a number is off any board or range
    anyway, and ``int()`` of an agent's digit string is slow and, past 4300 digits,
    refused with ValueError.

    >>> bounded_int("0042"), bounded_int("9" * 5000) == 10**6
    (42, True)
    """
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= max_digits else 10**max_digits


def at_least(name: str, value: int | None, minimum: int) -> None:
    """Refuse a setting below ``minimum``; None (a random preset) passes.

    >>> at_least("max_turns", 0, 1)
    Traceback (most recent call last):
    ...
    ValueError: max_turns must be at least 1, got 0
    """
    if value is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")


@lru_cache(maxsize=256)
def _turns_left_text(left: int) -> str:
    # cached: a suffix on every step says it, for the few counts games have
    return f"{left} turn{'s' if left != 1 else ''} left."


class TurnGame(gem.Env):
    """A game played one ``\\boxed{}`` move per turn within ``max_turns`` turns.

    Subclasses set ``self.max_turns`` in their constructor and implement
    :meth:`new_episode`, :meth:`parse_move`, :meth:`play` and :meth:`task_suffix`; the
    other hooks have defaults. See the module docstring for the flow.
    """

    #: the format-error message after ``Turn N:`` (before "The game is over.")
    format_error: str

    max_turns: int
    # no episode runs before the first reset
    turn: int = 0
    #: the reference's name of the turn counter
    turn_count = reference_alias("turn")
    done: bool = True

    # -- hooks ------------------------------------------------------------------------
    def new_episode(self) -> str:
        """Draw this episode from ``self.rng`` and reset the game's fields; returns the rules."""
        raise NotImplementedError

    def parse_move(self, boxed: str) -> Any | None:
        """The move in the content of the last ``\\boxed{}``, or None (a format error).

        ``boxed`` is untrusted and may be megabytes long: parse it in linear time (no
        regex that can backtrack over it, no ``int()`` of an unbounded digit string)."""
        raise NotImplementedError

    def play(self, move: Any) -> str | Outcome:
        """Apply a parsed move (invalid moves included: they only waste the turn); returns
        the feedback, or an :class:`Outcome` when the move earned a reward or ended the game."""
        raise NotImplementedError

    def task_suffix(self) -> str:
        """``info["suffix"]`` while the game runs (the reference's ``get_task_suffix``):
        the board as it is now, if the game has one, and the prompt for the next move."""
        raise NotImplementedError

    def get_task_suffix(self) -> str:
        """The reference package's name for :meth:`task_suffix` (scripts written against it call this)."""
        return self.task_suffix()

    def last_turn_note(self) -> str:
        """Appended to the feedback of the move that used the last turn (no suffix
        follows it: include what the player should see)."""
        return ""

    def partial_credit(self) -> float:
        """Added to the reward of the move that used the last turn."""
        return 0.0

    def game_state(self) -> dict[str, Any]:
        """The game's own fields for :meth:`get_state` (JSON-serialisable; the base adds
        ``max_turns``, ``turn``, ``done`` and ``rng``)."""
        return {}

    def load_game_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`game_state` returned."""

    # -- the flow ---------------------------------------------------------------------
    @property
    def turns_left(self) -> int:
        """Turns the player still has."""
        return self.max_turns - self.turn

    def turns_left_text(self) -> str:
        """``"3 turns left."`` (or ``"1 turn left."``)."""
        return _turns_left_text(self.max_turns - self.turn)

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        rules = self.new_episode()
        self.turn = 0
        self.done = False
        return rules, {"suffix": self.task_suffix()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self.done:
            return NO_EPISODE, 0.0, True, False, {}
        self.turn = turn = self.turn + 1
        boxed = last_boxed(action, False)  # not stripped: the game's parser sees the box as written
        move = self.parse_move(boxed) if boxed is not None else None
        if move is None:
            self.done = True
            text = f"Turn {turn}: {self.format_error} The game is over."
            # a format error on the last turn also hits the limit: report both
            info = {"suffix": "", "correct": False, FORMAT_ERROR: True}
            return text, FORMAT_ERROR_REWARD, True, turn >= self.max_turns, info
        outcome = self.play(move)
        if outcome.__class__ is str:  # feedback only: no reward, the game goes on
            if turn < self.max_turns:  # the usual step, returned without unpacking anything
                info = {"suffix": self.task_suffix(), FORMAT_ERROR: False}
                return f"Turn {turn}: {outcome}", 0.0, False, False, info
            text, reward, over, won = outcome, 0.0, False, False
        else:
            text, reward, over, won = outcome
        if over:
            self.done = True
            return f"Turn {turn}: {text}", reward, True, False, {"suffix": "", "correct": won, FORMAT_ERROR: False}
        if turn >= self.max_turns:
            self.done = True
            reward += self.partial_credit()
            info = {"suffix": "", "correct": False, FORMAT_ERROR: False}
            return f"Turn {turn}: {text}{self.last_turn_note()}", reward, True, True, info
        return f"Turn {turn}: {text}", reward, False, False, {"suffix": self.task_suffix(), FORMAT_ERROR: False}

    def get_state(self) -> dict[str, Any]:
        return {
            **self.game_state(),
            "max_turns": self.max_turns,
            "turn": self.turn,
            "done": self.done,
            "rng": self.rng_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.load_game_state(state)
        self.max_turns, self.turn, self.done = state["max_turns"], state["turn"], state["done"]
        self.set_rng_state(state["rng"])


class GuessingGame(TurnGame):
    """A :class:`TurnGame` with no board to show: the feedback on each guess is all the
    player needs, and the suffix only counts the turns left."""

    def task_suffix(self) -> str:
        return _next_guess_prompt(self.max_turns - self.turn) if self.turn else "Enter your first guess."


@lru_cache(maxsize=256)
def _next_guess_prompt(left: int) -> str:
    return f"{_turns_left_text(left)} Enter your next guess."


class DirectionGame(TurnGame):
    """A :class:`TurnGame` whose every move is one word of :attr:`directions`
    (``\\boxed{up}``, any case and spacing)."""

    directions: tuple[str, ...] = ("up", "down", "left", "right")

    def parse_move(self, boxed: str) -> str | None:
        direction = boxed.strip().lower()
        return direction if direction in self.directions else None

    def sample_random_action(self) -> str:
        """A random direction; drawn from the numpy stream, so sampling leaves the game's
        own draws (``self.rng``) unchanged."""
        # a uniform float scaled to an index: a third of the cost of Generator.integers
        return f"\\boxed{{{self.directions[int(self.np_random.random() * len(self.directions))]}}}"
