"""Step-timeout clocks for calls in flight."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any


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


#: ``poll(keys, timeout)``: wait at most ``timeout`` seconds (``None``: until one has news) for any
#: of the workers ``keys``; for each with news, ``(answers, died)``: the answers that arrived, in the
#: order of its calls, and how it died, if it did (``None``: alive)
Poll = Callable[[list[Hashable], "float | None"], dict[Hashable, tuple[list[Any], "str | None"]]]


def collect(waiting: dict[Hashable, list[Any]], poll: Poll, seconds: float | None,
            answered: Callable[[Any, Any], None], lose: Callable[[Hashable, list[Any], str | None], None]) -> None:
    """The one wait loop of the transports whose workers run their calls in order (the vector
    process backend's worker processes, the Ray backend's actors): ``waiting`` maps each worker
    to what it was sent and has not answered, in order; each answer goes to
    ``answered(item, answer)`` and gives the worker's next call ``seconds`` of its own. A worker
    that dies owing calls (``lose(worker, owed, how)``), or holds one past its deadline
    (``lose(worker, owed, None)``), is handed over with what it owes, the call it ran first."""
    deadlines = Deadlines(seconds)
    for key in waiting:
        deadlines.start(key)
    while waiting:
        for key, (answers, died) in poll(list(waiting), deadlines.wait()).items():
            pending = waiting[key]
            for answer in answers:
                answered(pending.pop(0), answer)
                deadlines.start(key)
            if pending and died is not None:
                lose(key, list(pending), died)
                pending.clear()
            if not pending:
                del waiting[key]
                deadlines.stop(key)
        for key in [k for k in waiting if deadlines.overdue(k)]:
            lose(key, waiting.pop(key), None)
            deadlines.stop(key)
