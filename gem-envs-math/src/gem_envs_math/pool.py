"""A supervised pool of grading processes, shared by every env of a process.

math-verify can run forever on hostile input (``9^{9^{9^9}}``) and its own timeout uses
``signal.alarm``, which only works in a main thread. So grading happens in worker
processes: the calling thread sends one job to an idle worker and waits for the reply
with a deadline; a worker that overruns is killed from outside (SIGKILL), the job scored
wrong, and a successor started in the background. A worker that dies (a crash, its
memory limit) is replaced the same way. No job can hold its caller past its timeout.

The pool is thread-safe: each call holds one worker for its duration, and callers beyond
the pool's size wait for a free worker. :func:`shared_pool` returns the pool of the
current process for a kind of job (re-created after a fork).

>>> pool = shared_pool()
>>> pool.compare(r"\\frac{1}{2}", "0.5").correct
True
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

#: default seconds one job may take before its worker is killed
DEFAULT_TIMEOUT = 5.0
#: default address-space limit of a worker (MiB): a runaway power tower fails with
#: MemoryError early instead of swapping the machine
DEFAULT_MEMORY_MB = 4096
#: seconds a new worker may take to start (imports sympy) before the pool gives up
_START_TIMEOUT = 120.0
_READY = "ready"
_EQUIVALENT = "gem_envs_math.verify:is_equivalent"


@dataclass(frozen=True)
class Outcome:
    """What one job returned.

    ``status``: ``"ok"`` (``value`` holds the result), ``"error"`` (the function raised;
    ``value`` holds the message), ``"timeout"`` (killed after overrunning) or
    ``"crashed"`` (the worker died).
    """

    value: Any
    status: str
    seconds: float


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison: ``status`` is ``"graded"``, ``"timeout"`` or ``"crashed"``."""

    correct: bool
    status: str
    seconds: float


def _default_workers() -> int:
    configured = os.environ.get("GEM_MATH_GRADER_WORKERS")
    if configured:
        return max(1, int(configured))
    return max(1, min(4, os.cpu_count() or 1))


def _resolve(function: str) -> Any:
    module, _, name = function.partition(":")
    return getattr(importlib.import_module(module), name)


def _worker_main(read_fd: int, write_fd: int, memory_mb: int, preload: Sequence[str]) -> None:
    """Loop of a worker: receive ``(function, args)``, reply ``(ok, value)``."""
    if memory_mb and sys.platform.startswith("linux"):
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    for module in preload:
        importlib.import_module(module)  # before READY, so imports never count against a timeout
    requests, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    replies.send(_READY)
    functions: dict[str, Any] = {}
    while True:
        try:
            function, args = pickle.loads(requests.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            if function not in functions:
                functions[function] = _resolve(function)
            reply = (True, functions[function](*args))
        except Exception as exc:  # reported to the caller as an "error" outcome
            reply = (False, f"{type(exc).__name__}: {exc}"[:2000])
        replies.send(reply)


class _Worker:
    """One worker process, started as ``python -m gem_envs_math.pool``.

    A plain subprocess rather than ``multiprocessing``: spawn and forkserver re-import the
    parent's ``__main__``, which breaks user scripts without an ``if __name__`` guard, and
    fork is unsafe once threads run.
    """

    def __init__(self, memory_mb: int | None, preload: Sequence[str]) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        command = [sys.executable, "-m", "gem_envs_math.pool", str(to_child_r), str(from_child_w), str(memory_mb or 0)]
        # one thread per worker: BLAS thread pools would only reserve address space
        # (which the memory limit counts) for nothing
        env = {**os.environ, **dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1")}
        try:
            self.process = subprocess.Popen(
                [*command, *preload], pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL, env=env
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
            code = self.process.returncode
            why = f"exited with code {code} (its error is on stderr)" if code and code > 0 else "did not start in time"
            raise RuntimeError(f"a grading worker preloading {list(preload)} {why}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self.requests.close()
        self.replies.close()


class GradingPool:
    """``workers`` worker processes, started on demand, each job bounded by ``timeout``.

    ``preload`` names modules every worker imports before it takes jobs.

    >>> with GradingPool(workers=1, timeout=1.0) as pool:
    ...     pool.compare("9^{9^{9^9}}", "1").status
    'timeout'
    """

    def __init__(
        self,
        workers: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        memory_mb: int | None = DEFAULT_MEMORY_MB,
        preload: Sequence[str] = ("gem_envs_math.verify",),
    ) -> None:
        self.size = workers or _default_workers()
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.preload = tuple(preload)
        self._idle: list[_Worker] = []
        self._started = 0  # live workers plus slots being (re)started
        self._closed = False
        self._cond = threading.Condition()
        #: how many workers were killed (overrun, death, interruption) and replaced
        self.restarts = 0

    # -- worker bookkeeping -----------------------------------------------------------
    def _new_worker(self) -> _Worker:
        return _Worker(self.memory_mb, self.preload)

    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle and self._started >= self.size and not self._closed:
                self._cond.wait()
            if self._closed:
                raise RuntimeError("the grading pool is closed")
            if self._idle:
                return self._idle.pop()
            self._started += 1  # reserve the slot, then start the worker outside the lock
        try:
            return self._new_worker()
        except BaseException:
            self._release(None)
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
        """Kill ``worker``; a background thread starts its successor in the same slot, so
        the caller returns at its deadline instead of waiting for a restart."""
        worker.kill()
        with self._cond:
            self.restarts += 1
        threading.Thread(target=self._start_into_slot, daemon=True, name="gem-math-grader-restart").start()

    def _start_into_slot(self) -> None:
        try:
            fresh: _Worker | None = self._new_worker()
        except RuntimeError:
            fresh = None  # the slot is given up; the next caller starts a worker itself
        self._release(fresh)

    # -- jobs -------------------------------------------------------------------------
    def call(self, function: str, *args: Any, timeout: float | None = None) -> Outcome:
        """Run ``function`` (``"module:name"``, importable in the worker) on ``args``
        (picklable) in a worker, within ``timeout`` seconds (default: the pool's)."""
        limit = self.timeout if timeout is None else timeout
        started = time.perf_counter()
        try:
            payload = pickle.dumps((function, args))
        except Exception as exc:  # unpicklable arguments: an error of this job, not of a worker
            return Outcome(f"the job cannot be sent to a worker: {exc}", "error", time.perf_counter() - started)
        worker = self._acquire()
        status, value = "interrupted", None
        try:
            worker.requests.send_bytes(payload)
            if worker.replies.poll(limit):
                ok, value = worker.replies.recv()
                status = "ok" if ok else "error"
            else:
                status = "timeout"
        except (EOFError, OSError):
            status = "crashed"
        finally:
            # a worker that did not reply (overran, died, or we were interrupted while it
            # worked) may still be busy with this job: it never goes back idle
            if status in ("ok", "error"):
                self._release(worker)
            else:
                self._replace(worker)
        return Outcome(value, status, time.perf_counter() - started)

    async def acall(self, function: str, *args: Any, timeout: float | None = None) -> Outcome:
        """:meth:`call` for asyncio code: waits in a thread, never blocks the event loop."""
        import asyncio

        return await asyncio.to_thread(self.call, function, *args, timeout=timeout)

    def compare(self, answer: str, reference: str, timeout: float | None = None) -> Verdict:
        """Whether bare answers ``answer`` and ``reference`` are equivalent, within ``timeout``."""
        outcome = self.call(_EQUIVALENT, answer, reference, timeout=timeout)
        status = {"ok": "graded", "error": "graded"}.get(outcome.status, outcome.status)
        return Verdict(outcome.status == "ok" and bool(outcome.value), status, outcome.seconds)

    async def acompare(self, answer: str, reference: str, timeout: float | None = None) -> Verdict:
        """:meth:`compare` for asyncio code."""
        import asyncio

        return await asyncio.to_thread(self.compare, answer, reference, timeout)

    def worker_pids(self) -> list[int]:
        """Pids of the idle workers (for tests and monitoring)."""
        with self._cond:
            return [w.pid for w in self._idle]

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


#: preloaded modules of each kind of shared pool
POOL_KINDS: dict[str, tuple[str, ...]] = {
    "math": ("gem_envs_math.verify",),
    "reasoning_gym": ("gem_envs_math.rg_score",),
}
_shared: dict[str, GradingPool] = {}
_shared_pid: int | None = None
_shared_lock = threading.Lock()


def shared_pool(kind: str = "math") -> GradingPool:
    """The process-wide pool for ``kind`` of job (created on first use): every math env
    grades through ``shared_pool("math")``.

    Its size comes from ``GEM_MATH_GRADER_WORKERS`` (default: CPU count, at most 4).
    """
    global _shared_pid
    with _shared_lock:
        # a forked child must not share its parent's pipes: it gets pools of its own
        if _shared_pid != os.getpid():
            _shared.clear()
            _shared_pid = os.getpid()
        if kind not in _shared:
            _shared[kind] = GradingPool(preload=POOL_KINDS[kind])
        return _shared[kind]


@atexit.register
def _close_shared() -> None:
    if _shared_pid == os.getpid():
        for pool in _shared.values():
            pool.close()


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
