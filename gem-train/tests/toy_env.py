"""A small guessing game for the trainer's tests, so they do not need the games suite."""

from __future__ import annotations

import re
import threading

import gem
from gem.conventions import FORMAT_ERROR

BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")


class ToyGuess(gem.Env):
    """Guess a number in [1, high] within max_turns; told "higher"/"lower" after each guess."""

    def __init__(self, high: int = 4, max_turns: int = 3) -> None:
        self.high, self.max_turns = high, max_turns

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.target = self.rng.randint(1, self.high)
        self.turn = 0
        return f"Guess my number from 1 to {self.high}. Answer like \\boxed{{3}}.", {}

    def step(self, action):
        self.turn += 1
        m = BOXED.search(action)
        if m is None:
            return "Wrong format.", -0.1, True, False, {"correct": False, FORMAT_ERROR: True}
        guess = int(m.group(1))
        if guess == self.target:
            return "Correct!", 1.0, True, False, {"correct": True, FORMAT_ERROR: False}
        hint = "higher" if guess < self.target else "lower"
        return f"No, {hint}.", 0.0, False, self.turn >= self.max_turns, {"correct": False, FORMAT_ERROR: False}

    def sample_random_action(self):
        return f"\\boxed{{{self.rng.randint(1, self.high)}}}"

    def get_state(self):
        return {"target": self.target, "turn": self.turn, "rng": self.rng_state()}

    def set_state(self, state):
        self.target, self.turn = state["target"], state["turn"]
        self.set_rng_state(state["rng"])


class Bisect:
    """A solver for ToyGuess: bisection on the hints."""

    def __init__(self, env):
        self.high = env.unwrapped.high

    def reset(self):
        self.lo, self.hi, self.last = 1, self.high, None

    def act(self, observation):
        if self.last is not None and "higher" in observation:
            self.lo = self.last + 1
        elif self.last is not None and "lower" in observation:
            self.hi = self.last - 1
        self.last = (self.lo + self.hi) // 2
        return f"\\boxed{{{self.last}}}"


CHATTER_ACTIONS = ["once", "upon", "a time"]


class Chatter(gem.Env):
    """Accepts any reply for max_turns turns (reward 0.1 each): episodes whose length the policy cannot cut short."""

    def __init__(self, max_turns: int = 3) -> None:
        self.max_turns = max_turns

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.turn = 0
        return "Tell me a story.", {}

    def step(self, action):
        self.turn += 1
        return "Go on.", 0.1, False, self.turn >= self.max_turns, {}

    def sample_random_action(self):
        return self.rng.choice(CHATTER_ACTIONS)

    def get_state(self):
        return {"turn": self.turn, "rng": self.rng_state()}

    def set_state(self, state):
        self.turn = state["turn"]
        self.set_rng_state(state["rng"])


#: set to let every stuck Stall step return (a test sets it when done, so no thread outlives it for long)
RELEASE = threading.Event()


class Stall(Chatter):
    """Chatter whose step hangs on reset seeds divisible by 3: an env stuck in a call. Its own random actions
    never hang it, so the tokenizer's corpus, played with them, builds without waiting."""

    def reset(self, seed=None, **kwargs):
        self.stuck = seed is not None and seed % 3 == 0
        return super().reset(seed)

    def step(self, action):
        if self.stuck and action not in CHATTER_ACTIONS:
            RELEASE.wait(120)
        return super().step(action)


class NoData(Chatter):
    """A dataset env whose data is not on this machine."""

    def __init__(self, **kwargs) -> None:
        from gem.errors import DataUnavailableError

        raise DataUnavailableError("This env needs the dataset 'x/y', which is not available here. Either pass a "
                                   "local copy: gem.make(<id>, source='data.jsonl').")
