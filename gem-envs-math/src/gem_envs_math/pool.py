"""A supervised pool of grading processes, shared by every math env of a process.

math-verify can run forever on hostile input (``9^{9^{9^9}}``) and its own timeout uses
``signal.alarm``, which only works in a main thread. So grading happens in worker
processes: the calling thread sends one comparison to an idle worker and waits for the
reply with a deadline; a worker that overruns is killed from outside (SIGKILL), scored
wrong, and replaced. A worker that dies (a crash, the memory limit) is replaced too.
Nothing a grade does can hang the caller for longer than its timeout plus a restart.

The pool is thread-safe: each call holds one worker for its duration, and callers beyond
the pool's size wait for a free worker. :func:`shared_pool` returns the one pool of the
current process (re-created after a fork).

>>> pool = shared_pool()                                 # doctest: +SKIP
>>> pool.compare(r"\\frac{1}{2}", "0.5").correct          # doctest: +SKIP
True
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

#: default seconds a single comparison may take before its worker is killed
DEFAULT_TIMEOUT = 5.0
#: default address-space limit of a worker (MiB): a runaway power tower dies of
#: MemoryError early instead of swapping the machine
DEFAULT_MEMORY_MB = 4096
#: seconds a new worker may take to start (imports sympy) before the pool gives up
_START_TIMEOUT = 120.0
_READY = "ready"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison.

    ``status`` is ``"graded"`` (the worker answered), ``"timeout"`` (killed after
    overrunning) or ``"crashed"`` (the worker died).
    """

    correct: bool
    status: str
    seconds: float


def _default_workers() -> int:
    configured = os.environ.get("GEM_MATH_GRADER_WORKERS")
    if configured:
        return max(1, int(configured))
    return max(1, min(4, os.cpu_count() or 1))


def _worker_main(read_fd: int, write_fd: int, memory_mb: int | None) -> None:
    """Loop of a grading process: receive (answer, reference), send back a bool."""
    if memory_mb and sys.platform.startswith("linux"):
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from gem_envs_math.verify import is_equivalent

    requests, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    replies.send(_READY)
    while True:
        try:
            answer, reference = requests.recv()
        except (EOFError, OSError):
            return
        replies.send(is_equivalent(answer, reference))


class _Worker:
    """One grading process, started as ``python -m gem_envs_math.pool``.

    A plain subprocess rather than ``multiprocessing``: spawn and forkserver re-import the
    parent's ``__main__``, which breaks user scripts that lack an ``if __name__`` guard,
    and fork is unsafe once threads run.
    """

    def __init__(self, memory_mb: int | None) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gem_envs_math.pool", str(to_child_r), str(from_child_w), str(memory_mb or 0)],
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.requests = Connection(to_child_w, readable=False)
        self.replies = Connection(from_child_r, writable=False)
        try:
            ready = self.replies.poll(_START_TIMEOUT) and self.replies.recv() == _READY
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.kill()
            raise RuntimeError(f"a grading worker did not start within {_START_TIMEOUT:.0f}s")

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.requests.close()
        self.replies.close()


class GradingPool:
    """``workers`` grading processes, started on demand, each grade bounded by ``timeout``.

    >>> with GradingPool(workers=2, timeout=2.0) as pool:          # doctest: +SKIP
    ...     pool.compare("9^{9^{9^9}}", "1").status
    'timeout'
    """

    def __init__(
        self, workers: int | None = None, timeout: float = DEFAULT_TIMEOUT, memory_mb: int | None = DEFAULT_MEMORY_MB
    ) -> None:
        self.size = workers or _default_workers()
        self.timeout = timeout
        self.memory_mb = memory_mb
        self._idle: list[_Worker] = []
        self._started = 0
        self._closed = False
        self._cond = threading.Condition()
        #: how many workers were killed for overrunning or replaced after dying
        self.restarts = 0

    # -- worker bookkeeping -----------------------------------------------------------
    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle and self._started >= self.size and not self._closed:
                self._cond.wait()
            if self._closed:
                raise RuntimeError("the grading pool is closed")
            if self._idle:
                return self._idle.pop()
            self._started += 1  # reserve the slot, then start outside the lock
        try:
            return _Worker(self.memory_mb)
        except BaseException:
            with self._cond:
                self._started -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker | None) -> None:
        with self._cond:
            if worker is None:
                self._started -= 1
            elif self._closed:
                worker.kill()
                self._started -= 1
            else:
                self._idle.append(worker)
            self._cond.notify()

    def _replace(self, worker: _Worker) -> None:
        """Kill ``worker``; a background thread starts its successor into the same slot,
        so the caller returns at its deadline instead of waiting for a restart."""
        worker.kill()
        with self._cond:
            self.restarts += 1
        threading.Thread(target=self._start_into_slot, daemon=True, name="gem-math-grader-restart").start()

    def _start_into_slot(self) -> None:
        try:
            fresh: _Worker | None = _Worker(self.memory_mb)
        except RuntimeError:
            fresh = None  # the slot is given up; the next caller starts a worker itself
        self._release(fresh)

    # -- grading ----------------------------------------------------------------------
    def compare(self, answer: str, reference: str, timeout: float | None = None) -> Verdict:
        """Whether ``answer`` equals ``reference`` (bare answers), within ``timeout`` seconds."""
        limit = self.timeout if timeout is None else timeout
        worker = self._acquire()
        started = time.perf_counter()
        status = "interrupted"
        try:
            worker.requests.send((answer, reference))
            if worker.replies.poll(limit):
                correct = bool(worker.replies.recv())
                status = "graded"
            else:
                status = "timeout"
        except (EOFError, OSError):
            status = "crashed"
        finally:
            # a worker that did not answer (timed out, died, or we were interrupted while
            # it worked) may still be busy with this request: it never goes back idle
            if status == "graded":
                self._release(worker)
            else:
                self._replace(worker)
        return Verdict(status == "graded" and correct, status, time.perf_counter() - started)

    async def acompare(self, answer: str, reference: str, timeout: float | None = None) -> Verdict:
        """:meth:`compare` for asyncio code: waits in a thread, never blocks the loop."""
        import asyncio

        return await asyncio.to_thread(self.compare, answer, reference, timeout)

    def worker_pids(self) -> list[int]:
        """Pids of the idle workers (for tests and monitoring)."""
        with self._cond:
            return [w.pid for w in self._idle if w.pid is not None]

    def close(self) -> None:
        """Kill every worker; calls after this raise."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._started -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()

    def __enter__(self) -> GradingPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_shared: GradingPool | None = None
_shared_pid: int | None = None
_shared_lock = threading.Lock()


def shared_pool() -> GradingPool:
    """The process-wide pool every math env grades with (created on first use).

    Its size comes from ``GEM_MATH_GRADER_WORKERS`` (default: CPU count, at most 4).
    """
    global _shared, _shared_pid
    with _shared_lock:
        # a forked child must not share its parent's pipes: give it a pool of its own
        if _shared is None or _shared_pid != os.getpid():
            _shared, _shared_pid = GradingPool(), os.getpid()
        return _shared


@atexit.register
def _close_shared() -> None:
    if _shared is not None and _shared_pid == os.getpid():
        _shared.close()


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) or None)
