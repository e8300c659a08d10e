"""Step-timeout clocks for calls in flight."""

from __future__ import annotations

import time
from collections.abc import Hashable


class Deadlines:
    """One clock per key (a call, or a worker that runs its calls in order) while it runs.

    :meth:`start` a key's clock when its call starts running (for a worker: when it is sent
    calls, and again with each answer, so that each call gets ``seconds`` of its own) and
    :meth:`stop` it when nothing of the key's is left to wait for. With ``seconds=None``
    nothing is ever due. Starting a clock from another thread (the thread that takes a
    call) is safe.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._due: dict[Hashable, float] = {}

    def start(self, key: Hashable) -> None:
        if self.seconds is not None:
            self._due[key] = time.monotonic() + self.seconds

    def stop(self, key: Hashable) -> None:
        self._due.pop(key, None)

    def running(self, key: Hashable) -> bool:
        return key in self._due

    def wait(self, idle: float | None = None) -> float | None:
        """Seconds until the next clock runs out (``idle`` when none runs)."""
        if not self._due:
            return idle
        return max(0.0, min(self._due.copy().values()) - time.monotonic())

    def overdue(self, key: Hashable) -> bool:
        due = self._due.get(key)
        return due is not None and time.monotonic() >= due
