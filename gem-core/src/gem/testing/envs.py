"""Small envs for tests and benchmarks of the core machinery (not registered by default).

- :class:`CountEnv`: guess a hidden number in ``\\boxed{}``; trivial to step.
- :class:`BusyEnv`: each step burns ``work`` iterations of pure-Python arithmetic,
  a stand-in for CPU-bound envs (puzzle generation, grading).
- :class:`FaultyEnv`: raises on the action ``"raise"``, kills its own process on
  ``"die"``, hangs on ``"hang"``, optionally fails its resets, to test the error
  handling of vector backends and the runner.
- :class:`StatelessFaultyEnv`: :class:`FaultyEnv` without ``get_state``/``set_state``, an
  env whose episode a vector env cannot carry over into a fresh worker.
- :class:`DriftingEnv`: answers with something its ``get_state`` leaves out, an env that
  does not go on from a restored state as it would have.
- :class:`SlowEnv`: sleeps ``delay`` seconds per step, a stand-in for I/O-bound envs.
- :class:`BarrierEnv`: each step waits at a shared ``threading.Barrier``, to prove that
  so many steps are in flight at once.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from typing import Any

from gem.conventions import FORMAT_ERROR, FORMAT_ERROR_REWARD
from gem.core import Env, StepResult
from gem.parsing import last_boxed


class CountEnv(Env):
    """Guess an integer in ``[1, high]`` within ``max_turns`` turns; hints higher/lower."""

    def __init__(self, high: int = 10, max_turns: int = 4) -> None:
        self.high, self.max_turns = high, max_turns
        self.target, self.turn = 1, 0

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.target, self.turn = self.rng.randint(1, self.high), 0
        return f"Guess a number between 1 and {self.high}. Answer as \\boxed{{N}}.", {}

    def step(self, action: str) -> StepResult:
        self.turn += 1
        found = last_boxed(action)
        if found is None or not re.fullmatch(r"-?\d{1,18}", found):
            return "Format error: answer as \\boxed{N}.", FORMAT_ERROR_REWARD, True, False, {FORMAT_ERROR: True}
        guess = int(found)
        if guess == self.target:
            return "Correct!", 1.0, True, False, {"correct": True, FORMAT_ERROR: False}
        hint = "higher" if guess < self.target else "lower"
        return f"Wrong, go {hint}.", 0.0, False, self.turn >= self.max_turns, {"correct": False, FORMAT_ERROR: False}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(1, self.high)}}}"

    def get_state(self) -> dict[str, Any]:
        return {"target": self.target, "turn": self.turn, "rng": self.rng_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.target, self.turn = state["target"], state["turn"]
        self.set_rng_state(state["rng"])


class BusyEnv(CountEnv):
    """:class:`CountEnv` whose every step first does ``work`` iterations of arithmetic."""

    def __init__(self, work: int = 20_000, high: int = 10, max_turns: int = 4) -> None:
        super().__init__(high=high, max_turns=max_turns)
        self.work = work

    def step(self, action: str) -> StepResult:
        acc = 0
        for i in range(self.work):
            acc = (acc * 31 + i) % 1_000_003
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "checksum": acc}


class SlowEnv(CountEnv):
    """:class:`CountEnv` that sleeps ``delay`` seconds per step (I/O stand-in)."""

    def __init__(self, delay: float = 0.05, high: int = 10, max_turns: int = 4) -> None:
        super().__init__(high=high, max_turns=max_turns)
        self.delay = delay

    def step(self, action: str) -> StepResult:
        time.sleep(self.delay)
        return super().step(action)


class BarrierEnv(CountEnv):
    """Each step waits at ``barrier`` (shared by the envs of one process): it only releases
    when ``barrier.parties`` steps are in flight at once (a broken barrier raises)."""

    def __init__(self, barrier: threading.Barrier, high: int = 10, max_turns: int = 4) -> None:
        super().__init__(high=high, max_turns=max_turns)
        self.barrier = barrier

    def step(self, action: str) -> StepResult:
        self.barrier.wait()
        return super().step(action)


class FaultyEnv(CountEnv):
    """Raises ``RuntimeError`` on ``"raise"``; kills its own process on ``"die"``; blocks
    for an hour on ``"hang"``. With ``fail_unseeded_resets=True`` every ``reset()``
    without a seed raises (as a level generator that gives up on some seeds), so the
    autoreset after an episode fails. ``FaultyEnv.hung.set()`` releases hung steps (in
    this process)."""

    hung = threading.Event()

    def __init__(self, high: int = 10, max_turns: int = 4, fail_unseeded_resets: bool = False) -> None:
        super().__init__(high=high, max_turns=max_turns)
        self.fail_unseeded_resets = fail_unseeded_resets

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        if seed is None and self.fail_unseeded_resets:
            raise RuntimeError("FaultyEnv could not build an episode")
        return super().reset(seed, **kwargs)

    def step(self, action: str) -> StepResult:
        if action == "raise":
            raise RuntimeError("FaultyEnv was asked to raise")
        if action == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if action == "hang":
            FaultyEnv.hung.wait(3600)
        return super().step(action)


class FailingSeedEnv(FaultyEnv):
    """:class:`FaultyEnv` whose episodes from ``failing_seed`` play ``fault`` (``"raise"``,
    ``"hang"`` or ``"die"``) on their first step whatever the action, so that a policy nobody
    scripts (a model in a framework's trainer) meets the fault in some episodes and not others."""

    def __init__(self, fault: str = "raise", failing_seed: int = 0, high: int = 10, max_turns: int = 4) -> None:
        super().__init__(high=high, max_turns=max_turns)
        self.fault, self.failing_seed = fault, failing_seed
        self._fail_next = False

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        self._fail_next = seed == self.failing_seed
        return super().reset(seed, **kwargs)

    def step(self, action: str) -> StepResult:
        if self._fail_next:
            self._fail_next = False
            return super().step(self.fault)
        return super().step(action)


class StatelessFaultyEnv(FaultyEnv):
    """:class:`FaultyEnv` with no state to snapshot, as the base :class:`~gem.core.Env`
    (``get_state`` raises ``NotImplementedError``)."""

    get_state = Env.get_state
    set_state = Env.set_state


class DriftingEnv(CountEnv):
    """:class:`CountEnv` whose observations count the resets and steps this instance ran,
    which its state leaves out: restored into a fresh instance, it answers otherwise."""

    def __init__(self, high: int = 10, max_turns: int = 4) -> None:
        super().__init__(high=high, max_turns=max_turns)
        self.moves = 0

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        self.moves += 1
        obs, info = super().reset(seed, **kwargs)
        return f"{obs} (move {self.moves})", info

    def step(self, action: str) -> StepResult:
        self.moves += 1
        obs, reward, terminated, truncated, info = super().step(action)
        return f"{obs} (move {self.moves})", reward, terminated, truncated, info
