"""A supervised pool of grading processes, shared by every env of a process.

math-verify can run forever on hostile input (``9^{9^{9^9}}``) and its own timeout uses
``signal.alarm``, which only works in a main thread. So grading happens in worker
processes, supervised from outside:

- **Deadlines from submission.** A job's ``timeout`` counts from the moment it is
  submitted, queueing included: whatever else is in flight, every call returns within
  its own timeout plus a small margin. A job still running at its deadline is killed
  (SIGKILL) and scored ``"timeout"``; a worker that dies is ``"crashed"``.
- **No head-of-line blocking.** At most ``workers`` jobs run at once, and the scheduler
  serves the job that has run least (least attained service; among jobs not yet
  started, the newest): a running job that has had at least one quantum (50 ms) in its
  current slice is paused (SIGSTOP) when a job that has used less time is waiting, and
  resumed (SIGCONT) later. An honest answer (a
  few milliseconds of work) therefore starts within about a quantum even behind dozens
  of hostile ones, and hostile ones share what CPU is left until their deadlines.
- **Cheap replacement.** Workers are forked from a template process that imported the
  grading modules once (a fork server), so replacing a killed worker costs milliseconds,
  not the seconds of a fresh interpreter importing sympy.

Callers never hold a thread per job: one scheduler thread owns every worker;
:meth:`GradingPool.call` waits on an event and :meth:`GradingPool.acall` on an asyncio
future. :func:`shared_pool` returns the pool of the current process for a kind of job
(re-created after a fork).

>>> pool = shared_pool()
>>> pool.compare(r"\\frac{1}{2}", "0.5").correct
True
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

#: default seconds one job may take, from submission, before it is scored "timeout"
DEFAULT_TIMEOUT = 5.0
#: default address-space limit of a worker (MiB): a runaway power tower fails with
#: MemoryError early instead of swapping the machine
DEFAULT_MEMORY_MB = 4096
#: the shortest slice (seconds) a running job gets before a job that used less replaces it
QUANTUM = 0.05
#: default cap on worker processes alive at once (running plus paused); jobs beyond it
#: wait for one to finish (their deadlines still count)
DEFAULT_MAX_PROCESSES = 64
#: seconds the template process may take to start (imports sympy) before the pool gives up
_START_TIMEOUT = 120.0
_READY = b"ready"
_EQUIVALENT = "gem_envs_math.verify:is_equivalent"


@dataclass(frozen=True)
class Outcome:
    """What one job returned.

    ``status``: ``"ok"`` (``value`` holds the result), ``"error"`` (the function raised;
    ``value`` holds the message), ``"timeout"`` (past its deadline, killed if it was
    running) or ``"crashed"`` (the worker died, or the pool closed under it).
    ``seconds`` runs from submission to the outcome.
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


# -- the processes ----------------------------------------------------------------------
def _serve(jobs: Connection) -> None:
    """Loop of a worker: receive ``(function, args)``, reply ``(ok, value)``."""
    functions: dict[str, Any] = {}
    while True:
        try:
            function, args = pickle.loads(jobs.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            if function not in functions:
                functions[function] = _resolve(function)
            reply = (True, functions[function](*args))
        except Exception as exc:  # reported to the caller as an "error" outcome
            reply = (False, f"{type(exc).__name__}: {exc}"[:2000])
        try:
            jobs.send(reply)
        except (OSError, pickle.PicklingError):
            jobs.send((False, "the result cannot be sent back"))


def _template_main(control_fd: int, memory_mb: int, preload: Sequence[str]) -> None:
    """The fork server: import ``preload`` once, then fork one worker per request.

    A preloaded module may define ``warm_up()``: it runs here, once, so that lazy
    initialisation (parser tables, caches) is inherited by every worker instead of being
    paid in each. A request is one byte with a socket attached (SCM_RIGHTS); the child
    serves jobs on that socket, the reply is the child's pid. Children are reaped by the kernel
    (SIGCHLD ignored), so killed workers never linger as zombies.
    """
    control = socket.socket(fileno=control_fd)
    for name in preload:
        module = importlib.import_module(name)  # before READY: imports never count against a timeout
        if callable(getattr(module, "warm_up", None)):
            module.warm_up()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    control.sendall(_READY)
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            return
        if not fds:
            return  # the pool closed its end
        pid = os.fork()
        if pid == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if memory_mb and sys.platform.startswith("linux"):
                import resource

                limit = memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            try:
                _serve(Connection(fds[0]))
            finally:
                os._exit(0)
        os.close(fds[0])
        control.sendall(pid.to_bytes(8, "little"))


class _Worker:
    """One forked worker: its job socket and a pidfd to signal it safely."""

    def __init__(self, pid: int, conn: Connection) -> None:
        self.pid = pid
        self.conn = conn
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:
            self.pidfd = None  # died at once: its socket reads EOF, the job is "crashed"

    def signal(self, sig: int) -> None:
        if self.pidfd is None:
            return
        try:
            signal.pidfd_send_signal(self.pidfd, sig)
        except ProcessLookupError:
            pass

    def kill(self, wait_s: float = 0.0) -> None:
        """SIGKILL it; with ``wait_s``, wait up to that long until it is gone."""
        self.signal(signal.SIGKILL)
        if self.pidfd is not None:
            if wait_s:
                poller = select.poll()
                poller.register(self.pidfd, select.POLLIN)
                poller.poll(wait_s * 1000)
            os.close(self.pidfd)
        self.conn.close()


class _Template:
    """The fork-server process, started as ``python -m gem_envs_math.pool``.

    A plain subprocess rather than ``multiprocessing``: spawn and forkserver re-import the
    parent's ``__main__``, which breaks user scripts without an ``if __name__`` guard, and
    forking the caller is unsafe once threads run. The template itself runs no threads,
    so forking it is safe.
    """

    def __init__(self, memory_mb: int | None, preload: Sequence[str]) -> None:
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-m", "gem_envs_math.pool", str(theirs.fileno()), str(memory_mb or 0), *preload]
        # one thread per worker: BLAS thread pools would only reserve address space
        # (which the memory limit counts) for nothing
        env = {**os.environ, **dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1")}
        try:
            self.process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env)
        finally:
            theirs.close()
        self.control = ours
        ready = select.select([ours], [], [], _START_TIMEOUT)[0] and ours.recv(len(_READY)) == _READY
        if not ready:
            try:
                code = self.process.wait(timeout=5)  # it closed the socket: it is exiting
            except subprocess.TimeoutExpired:
                code = None
            self.close()
            why = f"exited with code {code} (its error is on stderr)" if code and code > 0 else "did not start in time"
            raise RuntimeError(f"a grading worker preloading {list(preload)} {why}")

    def fork(self) -> _Worker:
        """A fresh worker (raises OSError if the template is gone)."""
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self.control, [b"f"], [theirs.fileno()])
            reply = b""
            while len(reply) < 8:
                chunk = self.control.recv(8 - len(reply))
                if not chunk:
                    raise OSError("the grading template process exited")
                reply += chunk
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return _Worker(int.from_bytes(reply, "little"), Connection(ours.detach()))

    def close(self) -> None:
        self.control.close()
        self.process.kill()
        self.process.wait()


# -- the scheduler ----------------------------------------------------------------------
class _Job:
    __slots__ = ("deadline", "on_done", "payload", "run_started", "submitted", "used", "worker")

    def __init__(self, payload: bytes, timeout: float, on_done: Callable[[Outcome], None]) -> None:
        self.payload = payload
        self.submitted = time.monotonic()
        self.deadline = self.submitted + timeout
        self.used = 0.0  # seconds run before the current slice
        self.run_started: float | None = None  # set while running
        self.worker: _Worker | None = None
        self.on_done = on_done

    def order(self) -> tuple[float, float]:
        # least time used first; among equals (jobs not yet started) the newest first:
        # a burst of hostile answers submitted earlier does not hold back later arrivals,
        # and under overload the oldest jobs, nearest their deadlines, are the ones lost
        return (self.used, -self.submitted)


class GradingPool:
    """Up to ``workers`` jobs running at once, each bounded by ``timeout`` from submission.

    ``preload`` names modules every worker has imported before it takes jobs;
    ``max_processes`` caps worker processes (running plus paused).

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
        max_processes: int = DEFAULT_MAX_PROCESSES,
    ) -> None:
        self.size = workers or _default_workers()
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.preload = tuple(preload)
        self.max_processes = max(self.size, max_processes)
        #: how many workers were killed (overrun, death) and replaced
        self.restarts = 0
        self._lock = threading.Lock()
        self._inbox: list[_Job] = []
        self._closed = False
        self._template: _Template | None = None
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        # owned by the scheduler thread
        self._idle: list[_Worker] = []
        self._queued: list[_Job] = []  # never started
        self._running: list[_Job] = []
        self._paused: list[_Job] = []

    # -- submitting -------------------------------------------------------------------
    def _submit(self, function: str, args: tuple, timeout: float | None, on_done: Callable[[Outcome], None]) -> None:
        limit = self.timeout if timeout is None else timeout
        try:
            payload = pickle.dumps((function, args))
        except Exception as exc:  # unpicklable arguments: an error of this job, not of a worker
            on_done(Outcome(f"the job cannot be sent to a worker: {exc}", "error", 0.0))
            return
        with self._lock:
            if self._closed:
                raise RuntimeError("the grading pool is closed")
            if self._template is None:
                # started in the caller, so that a template that cannot start raises here
                self._template = _Template(self.memory_mb, self.preload)
                self._thread = threading.Thread(target=self._schedule_loop, daemon=True, name="gem-math-grader")
                self._thread.start()
            self._inbox.append(_Job(payload, limit, on_done))
            self._wake()

    def call(self, function: str, *args: Any, timeout: float | None = None) -> Outcome:
        """Run ``function`` (``"module:name"``, importable in the worker) on ``args``
        (picklable) in a worker, within ``timeout`` seconds of now (default: the pool's)."""
        done = threading.Event()
        box: list[Outcome] = []

        def on_done(outcome: Outcome) -> None:
            box.append(outcome)
            done.set()

        self._submit(function, args, timeout, on_done)
        done.wait()
        return box[0]

    async def acall(self, function: str, *args: Any, timeout: float | None = None) -> Outcome:
        """:meth:`call` for asyncio code: the event loop waits on a future, no thread is held."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Outcome] = loop.create_future()

        def deliver(outcome: Outcome) -> None:
            if not future.done():
                future.set_result(outcome)

        def on_done(outcome: Outcome) -> None:
            try:
                loop.call_soon_threadsafe(deliver, outcome)
            except RuntimeError:
                pass  # the loop closed while the job ran: nobody is waiting

        self._submit(function, args, timeout, on_done)
        return await future

    def compare(self, answer: str, reference: str, timeout: float | None = None) -> Verdict:
        """Whether bare answers ``answer`` and ``reference`` are equivalent, within ``timeout``."""
        return _verdict(self.call(_EQUIVALENT, answer, reference, timeout=timeout))

    async def acompare(self, answer: str, reference: str, timeout: float | None = None) -> Verdict:
        """:meth:`compare` for asyncio code."""
        return _verdict(await self.acall(_EQUIVALENT, answer, reference, timeout=timeout))

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran (calls raise)."""
        return self._closed

    def worker_pids(self) -> list[int]:
        """Pids of the idle workers (for tests and monitoring)."""
        with self._lock:
            return [w.pid for w in self._idle]

    def close(self) -> None:
        """Kill every worker; jobs in flight end ``"crashed"``; calls after this raise."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._wake()
        if thread is not None:
            thread.join()
        else:
            self._shutdown()

    def __enter__(self) -> GradingPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the scheduler thread ---------------------------------------------------------
    def _wake(self) -> None:
        """Nudge the scheduler; call with ``_lock`` held (the pipe closes under it)."""
        if self._wake_w < 0:
            return
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # already awake: the pipe is full

    def _schedule_loop(self) -> None:
        try:
            while True:
                with self._lock:
                    self._queued += self._inbox
                    self._inbox.clear()
                    if self._closed:
                        break
                now = time.monotonic()
                self._expire(now)
                self._dispatch(now)
                self._prefork()
                ready = wait([self._wake_r, *(j.worker.conn for j in self._running + self._paused)], self._sleep(now))
                for item in ready:
                    if item == self._wake_r:
                        os.read(self._wake_r, 4096)
                    else:
                        self._reply(item)
        finally:
            # a scheduler that fails (a bug) closes the pool rather than leaving callers waiting
            with self._lock:
                self._closed = True
            self._shutdown()

    def _sleep(self, now: float) -> float:
        """Until the next deadline, or the moment a running job may be paused for the job
        that waits (its slice is over and it has used more)."""
        events = [j.deadline for j in self._queued + self._running + self._paused]
        candidate = self._candidate()
        if candidate is not None and len(self._running) >= self.size:
            events += [
                j.run_started + max(QUANTUM, candidate.used - j.used) + 1e-3  # type: ignore[operator]
                for j in self._running
            ]
        return max(0.0, min(events) - now) if events else 3600.0

    def _candidate(self) -> _Job | None:
        """The waiting job to run next: least time used, then last submitted; a job never
        started needs a worker the process cap allows."""
        room = bool(self._idle) or len(self._running) + len(self._paused) < self.max_processes
        waiting = [j for j in self._queued + self._paused if j.worker is not None or room]
        return min(waiting, key=_Job.order) if waiting else None

    def _finish(self, job: _Job, status: str, value: Any = None) -> None:
        for group in (self._queued, self._running, self._paused):
            if job in group:
                group.remove(job)
        job.on_done(Outcome(value, status, time.monotonic() - job.submitted))

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        self.restarts += 1

    def _expire(self, now: float) -> None:
        for job in [j for j in self._queued + self._running + self._paused if now >= j.deadline]:
            if job.worker is not None:
                self._discard(job.worker)
            self._finish(job, "timeout")

    def _reply(self, conn: Connection) -> None:
        job = next(j for j in self._running + self._paused if j.worker is not None and j.worker.conn is conn)
        worker = job.worker
        assert worker is not None
        try:
            ok, value = conn.recv()
        except (EOFError, OSError):
            self._discard(worker)
            self._finish(job, "crashed")
            return
        if job in self._paused:
            worker.signal(signal.SIGCONT)  # it replied just before it was paused
        if len(self._idle) < self.size:
            with self._lock:
                self._idle.append(worker)
        else:
            worker.kill()
        self._finish(job, "ok" if ok else "error", value)

    def _worker(self) -> _Worker | None:
        """An idle worker, or a new one if the process cap allows; None otherwise."""
        if self._idle:
            with self._lock:
                return self._idle.pop()
        if len(self._running) + len(self._paused) >= self.max_processes:
            return None
        assert self._template is not None
        try:
            return self._template.fork()
        except OSError:
            # the template died: start another (slow, and only after something killed it)
            self._template.close()
            try:
                self._template = _Template(self.memory_mb, self.preload)
                return self._template.fork()
            except (OSError, RuntimeError):
                return None

    def _prefork(self) -> None:
        """Keep ``workers`` idle spares, so a job rarely waits for a fork (one per pass of
        the loop, only while nothing waits, so the scheduler stays responsive)."""
        busy = len(self._running) + len(self._paused)
        if self._queued or len(self._idle) >= self.size or busy + len(self._idle) >= self.max_processes:
            return
        assert self._template is not None
        try:
            worker = self._template.fork()
        except OSError:
            return  # the template is gone: the next job that needs a worker restarts it
        with self._lock:
            self._idle.append(worker)
            self._wake()  # another pass: the next spare, if one is still missing

    def _start(self, job: _Job, now: float) -> bool:
        """Run ``job`` (a fresh worker, or its paused one resumed); False if no worker."""
        if job.worker is None:
            worker = self._worker()
            if worker is None:
                return False
            try:
                worker.conn.send_bytes(job.payload)
            except OSError:
                self._discard(worker)
                self._queued.remove(job)
                job.on_done(Outcome(None, "crashed", now - job.submitted))
                return True
            job.worker = worker
            self._queued.remove(job)
        else:
            job.worker.signal(signal.SIGCONT)
            self._paused.remove(job)
        job.run_started = now
        self._running.append(job)
        return True

    def _pause(self, job: _Job, now: float) -> None:
        assert job.worker is not None and job.run_started is not None
        job.worker.signal(signal.SIGSTOP)
        job.used += now - job.run_started
        job.run_started = None
        self._running.remove(job)
        self._paused.append(job)

    def _dispatch(self, now: float) -> None:
        """Run the waiting jobs that have used least; pause running ones past their slice."""
        while (candidate := self._candidate()) is not None:
            if len(self._running) >= self.size:
                victims = [
                    j for j in self._running
                    if now - j.run_started >= QUANTUM and j.used + (now - j.run_started) > candidate.used  # type: ignore[operator]
                ]  # fmt: skip
                if not victims:
                    return
                self._pause(max(victims, key=lambda j: j.used + (now - j.run_started)), now)  # type: ignore[operator]
            if not self._start(candidate, now):
                return

    def _shutdown(self) -> None:
        for job in self._queued + self._running + self._paused:
            if job.worker is not None:
                job.worker.kill()
            job.on_done(Outcome(None, "crashed", time.monotonic() - job.submitted))
        self._queued, self._running, self._paused = [], [], []
        with self._lock:
            idle, self._idle = self._idle, []
            for job in self._inbox:
                job.on_done(Outcome(None, "crashed", time.monotonic() - job.submitted))
            self._inbox.clear()
        for worker in idle:
            worker.kill(wait_s=1.0)
        if self._template is not None:
            self._template.close()
        with self._lock:
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_r = self._wake_w = -1


def _verdict(outcome: Outcome) -> Verdict:
    status = {"ok": "graded", "error": "graded"}.get(outcome.status, outcome.status)
    return Verdict(outcome.status == "ok" and bool(outcome.value), status, outcome.seconds)


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
        if kind not in _shared or _shared[kind].closed:
            _shared[kind] = GradingPool(preload=POOL_KINDS[kind])
        return _shared[kind]


@atexit.register
def _close_shared() -> None:
    if _shared_pid == os.getpid():
        for pool in _shared.values():
            pool.close()


if __name__ == "__main__":
    _template_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
