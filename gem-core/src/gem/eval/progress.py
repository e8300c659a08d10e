"""A one-line progress bar with the live success rate (stderr; no dependency).

On a terminal the line is redrawn in place; in a log file a line is written every
tenth of the way, so CI logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts finished episodes of one env; ``done`` episodes were finished before a resume."""

    def __init__(self, label: str, total: int, done: int = 0, successes: int = 0, errors: int = 0,
                 stream: TextIO | None = None, enabled: bool = True) -> None:
        self.label, self.total = label, total
        self.count, self.successes, self.errors, self.resumed = done, successes, errors, done
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.start = time.perf_counter()
        self._next_log = self.count
        self._draw(force=True)

    def update(self, success: bool, error: bool) -> None:
        self.count += 1
        self.successes += bool(success)
        self.errors += bool(error)
        self._draw()

    def line(self) -> str:
        width = 24
        filled = int(width * self.count / self.total) if self.total else width
        rate = self.successes / self.count if self.count else 0.0
        elapsed = time.perf_counter() - self.start
        speed = (self.count - self.resumed) / elapsed if elapsed > 0 else 0.0
        resumed = f"  ({self.resumed} resumed)" if self.resumed else ""
        return (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total}  "
                f"success {rate:.3f}  errors {self.errors}  {speed:.1f} ep/s{resumed}")

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r" + self.line() + "\x1b[K")
            self.stream.flush()
        elif force or self.count >= self._next_log or self.count == self.total:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._next_log = self.count + max(1, self.total // 10)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
