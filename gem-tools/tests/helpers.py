"""Helpers shared by the tests: a tiny env and a process finder."""

from __future__ import annotations

import os
import re
from typing import Any

import gem
from gem.conventions import FORMAT_ERROR_REWARD


class SumEnv(gem.Env):
    """Asks for a sum; the answer goes in \\boxed{}. One step ends the episode."""

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.a, self.b = self.rng.randint(100, 999), self.rng.randint(100, 999)
        self.steps = 0
        return f"What is {self.a} + {self.b}?", {}

    def step(self, action: str):
        self.steps += 1
        m = re.search(r"\\boxed\{(-?\d+)\}", action)
        if m is None:
            return "format error", FORMAT_ERROR_REWARD, True, False, {"correct": False, "format_error": True}
        correct = int(m.group(1)) == self.a + self.b
        return "done", float(correct), True, False, {"correct": correct, "format_error": False}

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(0, 2000)}}}"

    def get_state(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "steps": self.steps, "rng": self.rng_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self.a, self.b, self.steps = state["a"], state["b"], state["steps"]
        self.set_rng_state(state["rng"])


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry.name))
        except OSError:
            continue
    return found
