"""Progress of one env's episodes with the live success rate, on stderr.

On a terminal it is a tqdm bar redrawn in place; in a log file a plain line is written
every tenth of the way, so CI logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

#: the bars on screen now: a notice is written above them rather than through them
_ACTIVE: list[Progress] = []


def notice(line: str) -> None:
    """Write ``line`` on stderr, above the progress bar if one is drawn (a request that timed out
    and is retried, a server that has not answered yet): a wait is never silent. Quiet while the
    current run's progress is off (``--no-progress``)."""
    bar = _ACTIVE[-1] if _ACTIVE else None
    if bar is not None and not bar.enabled:
        return
    if bar is not None and bar._bar is not None:
        bar._bar.write(line, file=bar.stream)
        return
    stream = bar.stream if bar is not None else sys.stderr
    stream.write(line + "\n")
    stream.flush()


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
        self._bar: Any = None
        _ACTIVE.append(self)
        if self.tty:
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=done, desc=label, unit="ep", file=self.stream,
                             dynamic_ncols=True)
        self._draw(force=True)

    def update(self, success: bool, error: bool) -> None:
        self.count += 1
        self.successes += bool(success)
        self.errors += bool(error)
        self._draw()

    def _scores(self) -> str:
        rate = self.successes / self.count if self.count else 0.0
        return f"success {rate:.3f}  errors {self.errors}"

    def line(self) -> str:
        """The plain line written to a log file."""
        width = 24
        filled = int(width * self.count / self.total) if self.total else width
        elapsed = time.perf_counter() - self.start
        speed = (self.count - self.resumed) / elapsed if elapsed > 0 else 0.0
        resumed = f"  ({self.resumed} resumed)" if self.resumed else ""
        return (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total}  "
                f"{self._scores()}  {speed:.1f} ep/s{resumed}")

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            resumed = f", {self.resumed} resumed" if self.resumed else ""
            # tqdm redraws at most every tenth of a second; the first draw shows the bar at once
            self._bar.set_postfix_str(self._scores() + resumed, refresh=force)
            self._bar.update(self.count - self._bar.n)
        elif force or self.count >= self._next_log or self.count == self.total:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._next_log = self.count + max(1, self.total // 10)

    def close(self) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self._bar is not None:
            self._bar.close()
