"""A supervised pool of grading processes, shared by every env of a process.

math-verify can run forever on hostile input (``9^{9^{9^9}}``) and its own timeout uses
``signal.alarm``, which only works in a main thread. So grading happens in worker
processes, supervised from outside, and a grade depends on the answer alone, never on
what else is in flight:

- **Deadlines count the answer's own work.** A job's ``timeout`` is CPU seconds: the time
  its worker spent on a CPU for it (``/proc/<pid>/schedstat``), not the time it waited for
  a worker, sat paused, or waited for a CPU on a busy machine. A job that spends its budget
  is killed (SIGKILL) and scored ``"timeout"``; so is one that sleeps (blocks on anything
  but a CPU) for as long, which CPU time alone would never end. A worker that dies is
  ``"crashed"``.
- **Least attained service.** At most ``workers`` jobs run at once, and the scheduler
  serves the job that has used least CPU (among jobs not yet started, the oldest): a
  running job that has had a quantum (20 ms of CPU) in its current slice is paused
  (SIGSTOP) when one that has used less is waiting, and resumed (SIGCONT) later. An honest
  answer (a few milliseconds of work) is done in its first slice: it waits for the first
  slices of the answers submitted before it, never for a hostile one to finish, and
  hostile ones share what CPU is left until their budgets run out.
- **Admission never waits on the jobs already in.** Running and paused jobs hold a
  process each, at most ``max_processes``. At that cap a job that has not started evicts
  the paused job that has used most CPU: its worker is killed and the job is queued again,
  to run from scratch with its full budget once a process is free (an evicted job waits
  for one rather than evicting in turn, so evictions cannot chase each other). Load defers
  a grade; it never scores one.
- **A memory budget for the pool.** ``memory_budget_mb`` bounds the summed resident memory
  of the workers (their RSS, pages shared with the template counted in each), sampled
  with the CPU times. Over it, idle spares go first, then the largest paused job (else the
  largest running one) is evicted and queued again, to restart once it fits beside the
  others or runs alone. A job over the budget by itself is scored ``"memory"``: that
  answer failed, not the others. The default, :data:`DEFAULT_MEMORY_BUDGET_MB`, is sized
  for several env processes on a small machine. Accounting rather than a cgroup: a cgroup
  needs root or a delegated hierarchy, and the kernel's OOM killer inside one cannot tell
  the answer that went over by itself from the ones beside it.
- **Warm workers.** Workers are forked from a template process that imported the grading
  modules once, in gem-tools' sandbox where one works (:mod:`gem_envs_math.workers`: how a
  worker is born, what it runs and the JSON it may send back, never a pickle). For graders
  that only parse the answer (math-verify) a worker back from a job takes the next one; a
  grader that runs the answer (reasoning-gym's scorers ``eval`` some) gets a fresh worker
  per job (:class:`Kind`). Up to ``workers + 1`` idle workers are kept: the extra one takes
  the job a pause lets in, since a fresh fork pays for copying every page of the template
  it touches (about 30 ms of CPU per sympy grade), which a kept worker has paid once.

Failures are named as in gem-core's env host (:mod:`gem.host.failures`): a job past its
deadline is a step timeout (status :data:`TIMEOUT`, the host's ``StepTimeout``), a job
whose worker died a worker death (:data:`CRASHED`, the host's ``WorkerDied``), and the
value of either says what happened in the host's words (:func:`gem.host.failures.overran`).
Every killed worker is replaced (:attr:`GradingPool.restarts`), and an evicted job is run
again from scratch, never lost. :attr:`Outcome.failure` gives the host's name of a failed
job. The deadlines are the pool's own, not :class:`gem.host.deadlines.Deadlines`: theirs
are wall-clock seconds from a call's start, these are a job's own CPU seconds.

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
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from gem.host.failures import STEP_TIMEOUT, WORKER_DIED, overran
from gem_envs_math.workers import MAX_REPLY_BYTES, Template, Worker
from gem_envs_math.workers import parse_reply as _parse_reply

#: default CPU seconds one job may use before it is scored "timeout"
DEFAULT_TIMEOUT = 5.0
#: default address-space limit of a worker (MiB): a runaway power tower fails with
#: MemoryError early instead of swapping the machine
DEFAULT_MEMORY_MB = 4096
#: default budget (MiB) on the summed RSS of a pool's workers. A worker at rest is about
#: 60 MiB resident (mostly pages shared with the template, counted in each), so 1 GiB
#: holds the default 2-4 workers, their spares and a dozen paused jobs, and any honest
#: answer (they need well under 100 MiB); a 2-core 24 GiB machine running eight env
#: processes, each with its own pool, then gives graders at most a third of its memory.
#: A pool of more workers gets at least :data:`_BUDGET_PER_WORKER_MB` per worker.
DEFAULT_MEMORY_BUDGET_MB = 1024
#: room for a worker, its idle spare and two paused jobs
_BUDGET_PER_WORKER_MB = 256
#: the CPU seconds a running job gets in a slice before a job that used less replaces it
QUANTUM = 0.02
#: seconds between samples of the running workers' CPU time and memory
SAMPLE = 0.025
#: default cap on worker processes alive at once (running plus paused); at the cap a new
#: job evicts the paused job that used most CPU (it is retried later)
DEFAULT_MAX_PROCESSES = 64
#: a worker back from a job holding this much more memory than a fresh one is replaced
#: rather than kept idle (what it kept would count against the budget)
_RETAINED = 64 << 20
#: the longest the scheduler waits for a killed worker holding much memory to be gone
_TEARDOWN_S = 1.0
_EQUIVALENT = "gem_envs_math.verify:is_equivalent"
#: the status of a job that spent its deadline (CPU budget) or slept as long, and was killed
TIMEOUT = "timeout"
#: the status of a job whose worker died, or whose pool closed under it
CRASHED = "crashed"
#: the status of a job whose worker alone went over the pool's memory budget, and was killed
MEMORY = "memory"
#: a failed job's status -> the env host's name for that failure
_HOST_NAMES = {TIMEOUT: STEP_TIMEOUT, CRASHED: WORKER_DIED}
#: the value of a job whose worker died (its exit status is the template's to reap, not ours)
_DIED = "the grading worker died (or sent more than MAX_REPLY_BYTES); it was replaced"
_CLOSED = "the grading pool closed while the job was in flight"


@dataclass(frozen=True)
class Outcome:
    """What one job returned.

    ``status``: ``"ok"`` (``value`` holds the result), ``"error"`` (the function raised;
    ``value`` holds the message), ``"timeout"`` (it spent its CPU budget, or slept as
    long, and was killed), ``"memory"`` (its worker alone went over the pool's memory
    budget and was killed) or ``"crashed"`` (the worker died, or the pool closed under it);
    a failed job's ``value`` says what happened. ``seconds`` runs from submission to the
    outcome, waiting and retries included.
    """

    value: Any
    status: str
    seconds: float

    @property
    def failure(self) -> str | None:
        """The env host's name of this job's failure (``StepTimeout``, ``WorkerDied``), if it is one."""
        return _HOST_NAMES.get(self.status)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison: ``status`` is ``"graded"``, ``"timeout"``,
    ``"memory"`` or ``"crashed"``."""

    correct: bool
    status: str
    seconds: float


def _setting(name: str, default: int, minimum: int) -> int:
    configured = os.environ.get(name, "").strip()
    if not configured:
        return default
    try:
        value = int(configured)
    except ValueError:
        raise ValueError(f"{name}={configured!r}: set it to a whole number (or unset it for {default})") from None
    return max(minimum, value)


def _default_workers() -> int:
    return _setting("GEM_MATH_GRADER_WORKERS", max(1, min(4, os.cpu_count() or 1)), 1)


def _default_memory_budget_mb(workers: int) -> int:
    default = max(DEFAULT_MEMORY_BUDGET_MB, _BUDGET_PER_WORKER_MB * workers)
    return _setting("GEM_MATH_GRADER_MEMORY_BUDGET_MB", default, 0)


def _sandbox_setting() -> bool | None:
    """``GEM_MATH_GRADER_SANDBOX``: ``0`` never sandbox the graders, ``1`` always (a pool
    whose sandbox cannot start fails), unset: where it works."""
    configured = os.environ.get("GEM_MATH_GRADER_SANDBOX", "").strip()
    if configured not in ("", "0", "1"):
        raise ValueError(f"GEM_MATH_GRADER_SANDBOX={configured!r}: set it to 0, 1 or leave it unset")
    return None if not configured else configured == "1"


# -- the scheduler ----------------------------------------------------------------------
class _Job:
    __slots__ = (
        "blocked", "budget", "fresh", "mark", "need_rss", "on_done", "payload", "served", "slice", "spent",
        "submitted", "worker",
    )  # fmt: skip

    def __init__(self, payload: bytes, timeout: float, on_done: Callable[[Outcome], None]) -> None:
        self.payload = payload
        self.budget = timeout  # CPU seconds one attempt may use
        self.submitted = time.monotonic()
        self.served = 0.0  # CPU seconds over all its attempts: its place in the queue
        self.spent = 0.0  # CPU seconds of this attempt: its deadline
        self.slice = 0.0  # CPU seconds since it last started or resumed
        self.blocked = 0.0  # seconds of this attempt it ran neither on a CPU nor waiting for one
        #: (monotonic time, CPU seconds, seconds waited for a CPU) at its last sample
        self.mark: tuple[float, float, float | None] | None = None
        self.worker: Worker | None = None
        self.fresh = True  # never evicted: may evict a paused job to get a process
        self.need_rss = 0  # bytes it held when evicted for memory: the room it needs to restart
        self.on_done = on_done

    def order(self) -> tuple[float, float]:
        # least CPU used first; among equals (jobs not yet started) the oldest first, so a
        # stream of newer answers cannot hold an older one back
        return (self.served, self.submitted)

    def left(self) -> float:
        """Seconds of its deadline this attempt has left: CPU it may still use, or as long asleep."""
        return self.budget - max(self.spent, self.blocked)

    def restart(self) -> None:
        """Forget the current attempt (its worker was killed): the job runs again from scratch."""
        self.worker = None
        self.mark = None
        self.spent = self.slice = self.blocked = 0.0
        self.fresh = False


class GradingPool:
    """Up to ``workers`` jobs running at once, each bounded by ``timeout`` CPU seconds of
    its own work.

    ``preload`` names modules every worker has imported before it takes jobs;
    ``memory_mb`` limits each worker's address space; ``max_processes`` caps worker
    processes (running plus paused); ``memory_budget_mb`` bounds the workers' summed RSS
    (default ``GEM_MATH_GRADER_MEMORY_BUDGET_MB``, else :data:`DEFAULT_MEMORY_BUDGET_MB`
    or 256 MiB per worker if more; 0 for none). ``sandbox``: whether the workers are born
    in gem-tools' sandbox (see :class:`~gem_envs_math.workers.Template`; default ``GEM_MATH_GRADER_SANDBOX``, else
    where it works); :meth:`isolation` says where they run. ``reuse_workers``: whether a
    worker takes another job after one (default: what :data:`POOL_KINDS` declares for this
    ``preload``, else never, so a job that runs the answer's code cannot touch another's grade).

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
        memory_budget_mb: int | None = None,
        sandbox: bool | None = None,
        reuse_workers: bool | None = None,
    ) -> None:
        self.size = workers or _default_workers()
        #: whether a worker back from a job takes the next one: only for jobs that parse the answer and
        #: never run it (a job that runs the answer's code could change every later grade of its worker).
        #: None: what the kind of pool with this ``preload`` declares (:data:`POOL_KINDS`), else fresh
        self.reuse_workers = _declared_reuse(preload) if reuse_workers is None else bool(reuse_workers)
        self.sandbox = _sandbox_setting() if sandbox is None else sandbox
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.preload = tuple(preload)
        self.max_processes = max(self.size, max_processes)
        if memory_budget_mb is None:
            memory_budget_mb = _default_memory_budget_mb(self.size)
        self.memory_budget_mb = max(0, memory_budget_mb)
        self._budget = self.memory_budget_mb << 20
        #: how many workers were killed (overrun, death, eviction) and replaced
        self.restarts = 0
        #: how many jobs were evicted (process cap, memory) and queued again to be retried
        self.evictions = 0
        self._lock = threading.Lock()
        self._inbox: list[_Job] = []
        self._closed = False
        self._template: Template | None = None
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        # owned by the scheduler thread
        self._idle: list[Worker] = []
        self._queued: list[_Job] = []  # holding no worker: never started, or evicted
        self._running: list[_Job] = []
        self._paused: list[_Job] = []
        self._spare_rss = 0  # resident bytes of a freshly forked worker

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
                self._launch()
            self._inbox.append(_Job(payload, limit, on_done))
            self._wake()

    def _launch(self) -> None:
        """Start the scheduler thread, which starts the template (a sandboxed one dies with
        the thread that started it) before it schedules; wait for it here, so that a template
        that cannot start raises in the caller. Call with ``_lock`` held."""
        started = threading.Event()
        failed: list[BaseException] = []

        def main() -> None:
            try:
                self._template = Template(self.memory_mb, self.preload, self.sandbox)
            except BaseException as exc:
                failed.append(exc)
                return
            finally:
                started.set()
            self._schedule_loop()

        thread = threading.Thread(target=main, daemon=True, name="gem-math-grader")
        thread.start()
        started.wait()
        if failed:
            raise failed[0]
        self._thread = thread

    def isolation(self) -> tuple[str, str]:
        """``(where, why)``: where the workers run (``"bwrap sandbox"``, ``"unshare sandbox"``
        or ``"unsandboxed"``) and why; starts the template if none runs yet."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the grading pool is closed")
            if self._template is None:
                self._launch()
            assert self._template is not None
            return self._template.isolation, self._template.why

    def call(self, function: str, *args: Any, timeout: float | None = None) -> Outcome:
        """Run ``function`` (``"module:name"``, importable in the worker) on ``args``
        (picklable) in a worker, allowing it ``timeout`` CPU seconds (default: the pool's)."""
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
        """Whether bare answers ``answer`` and ``reference`` are equivalent, within ``timeout`` CPU seconds."""
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
                for job in self._running:
                    self._account(job, now)
                self._enforce_memory()
                self._expire()
                self._dispatch(now)
                self._prefork()
                ready = wait([self._wake_r, *(j.worker.conn for j in self._running + self._paused)], self._sleep())
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

    def _sleep(self) -> float | None:
        """Until the next sample, a budget that may run out, or the moment a running job
        may be paused for the job that waits; None (until woken) while nothing runs."""
        if not self._running:
            return None
        waits = [SAMPLE, *(j.left() for j in self._running)]
        candidate = self._candidate()
        if candidate is not None and len(self._running) >= self.size:
            waits += [max(QUANTUM - j.slice, candidate.served - j.served) for j in self._running]
        return max(1e-3, min(waits) + 1e-3)  # a job's CPU time grows no faster than the clock

    def _account(self, job: _Job, now: float) -> None:
        """Charge a running job the CPU its worker used since the last sample; sample its RSS."""
        worker = job.worker
        assert worker is not None
        worker.measure_rss()
        usage = worker.usage()
        if usage is None or job.mark is None:
            return  # it is gone: its socket reads EOF and the job is "crashed"
        wall, cpu, waited = job.mark
        ran = max(0.0, usage[0] - cpu)
        job.spent += ran
        job.served += ran
        job.slice += ran
        # without schedstat a sleeping worker cannot be told from one starved of CPU: only
        # its CPU time bounds it then
        if usage[1] is not None and waited is not None:
            job.blocked += max(0.0, now - wall - ran - (usage[1] - waited))
        job.mark = (now, *usage)

    def _candidate(self) -> _Job | None:
        """The waiting job to run next: least CPU used, then first submitted. A job holding
        no worker needs a process: one the cap allows, or (never evicted) one it may evict;
        a job evicted for memory also needs that much room beside the others, or none there."""
        room = self._room()
        holders = self._running + self._paused
        held = sum(j.worker.rss for j in holders)  # type: ignore[union-attr]

        def startable(job: _Job) -> bool:
            if job.worker is not None:
                return True
            if job.need_rss and holders and held + job.need_rss > self._budget:
                return False
            return room or job.fresh

        return min(filter(startable, self._queued + self._paused), key=_Job.order, default=None)

    def _room(self) -> bool:
        return bool(self._idle) or len(self._running) + len(self._paused) < self.max_processes

    def _resident(self) -> int:
        return sum(w.rss for w in self._idle) + sum(j.worker.rss for j in self._running + self._paused)  # type: ignore[union-attr]

    def _finish(self, job: _Job, status: str, value: Any = None) -> None:
        for group in (self._queued, self._running, self._paused):
            if job in group:
                group.remove(job)
        job.on_done(Outcome(value, status, time.monotonic() - job.submitted))

    def _retire(self, worker: Worker) -> None:
        """Kill ``worker``; one holding much memory is waited for (briefly), since until it
        is gone its memory is still taken and a worker forked meanwhile would add to it."""
        big = worker.rss > self._spare_rss + _RETAINED
        worker.kill(wait_s=_TEARDOWN_S if big else 0.0)

    def _discard(self, worker: Worker) -> None:
        self._retire(worker)
        self.restarts += 1

    def _evict(self, job: _Job, need_rss: int = 0) -> None:
        """Kill ``job``'s worker for the sake of the others and queue it again: load defers
        a grade, it never scores one."""
        assert job.worker is not None
        self._discard(job.worker)
        (self._paused if job in self._paused else self._running).remove(job)
        job.restart()
        job.need_rss = max(job.need_rss, need_rss)
        self._queued.append(job)
        self.evictions += 1

    def _expire(self) -> None:
        for job in [j for j in self._running if j.left() <= 0]:
            self._discard(job.worker)  # type: ignore[arg-type]
            self._finish(job, TIMEOUT, f"{overran('grading', job.budget)} of its own CPU time (or slept as long); "
                                       "its worker was killed and replaced")

    def _enforce_memory(self, headroom: int = 0) -> None:
        """Bring the workers' summed RSS within the budget, less ``headroom``: idle spares
        go first, then the largest paused job (else the largest running one) is evicted,
        unless its own RSS is over the budget: then that answer has failed by itself."""
        while self._budget and self._resident() + headroom > self._budget:
            if self._idle:
                with self._lock:
                    spare = self._idle.pop()
                spare.kill()
                continue
            if not (self._paused or self._running):
                return
            job = max(self._paused or self._running, key=lambda j: j.worker.rss)  # type: ignore[union-attr]
            assert job.worker is not None
            if job.worker.rss > self._budget:
                self._discard(job.worker)
                self._finish(job, MEMORY)
            else:
                self._evict(job, need_rss=job.worker.rss)

    def _reply(self, conn: Connection) -> None:
        job = next(j for j in self._running + self._paused if j.worker is not None and j.worker.conn is conn)
        worker = job.worker
        assert worker is not None
        try:
            ok, value = _parse_reply(conn.recv_bytes(MAX_REPLY_BYTES))
        except (EOFError, OSError):  # OSError: also a reply over MAX_REPLY_BYTES
            self._discard(worker)
            self._finish(job, CRASHED, _DIED)
            return
        except ValueError as exc:  # a malformed reply ends its worker and fails its job
            self._discard(worker)
            self._finish(job, CRASHED, f"the grading worker sent a malformed reply: {exc}")
            return
        if job in self._paused:
            worker.signal(signal.SIGCONT)  # it replied just before it was paused
        (self._paused if job in self._paused else self._running).remove(job)
        # up to one idle worker more than the slots: the job a pause lets in runs on it, not on a fresh
        # fork; a pool whose jobs run the answer's code never reuses a worker (reuse_workers)
        if self.reuse_workers and len(self._idle) <= self.size and \
                worker.measure_rss() <= self._spare_rss + _RETAINED:
            with self._lock:
                self._idle.append(worker)
                self._queued += self._inbox
                self._inbox.clear()
            # the worker takes the next job before this one's caller is woken: one worker
            # otherwise idles while the caller runs (it holds the GIL) and the loop comes round
            self._dispatch(time.monotonic())
        else:
            self._retire(worker)
        self._finish(job, "ok" if ok else "error", value)

    def _spawn(self, restart: bool = True) -> Worker | None:
        """A fresh worker from the template; with ``restart``, a template that died is
        started again (slow, and only after something killed it). None if none can start."""
        assert self._template is not None
        try:
            worker = self._template.fork()
        except OSError:
            if not restart:
                return None
            self._template.close()
            try:
                self._template = Template(self.memory_mb, self.preload, self.sandbox)
                worker = self._template.fork()
            except (OSError, RuntimeError):
                return None
        self._spare_rss = worker.measure_rss()
        return worker

    def _prefork(self) -> None:
        """Keep a worker ready for each of the ``workers`` slots no job runs in, so a job
        rarely waits for a fork (one per pass of the loop, only while nothing waits and the
        memory budget has room for one). A worker back from a job takes its slot again:
        forking a spare beside every running job would retire a warm worker per job, and
        make each grade pay for a fork in the scheduler's thread."""
        busy = len(self._running) + len(self._paused)
        if self._queued or len(self._idle) + len(self._running) >= self.size or \
                busy + len(self._idle) >= self.max_processes:
            return
        if self._budget and self._resident() + self._spare_rss > self._budget:
            return
        worker = self._spawn(restart=False)  # the next job that needs a worker restarts the template
        if worker is None:
            return
        with self._lock:
            self._idle.append(worker)
            self._wake()  # another pass: the next spare, if one is still missing

    def _start(self, job: _Job, now: float) -> None:
        """Run ``job``: its paused worker resumed, else an idle or a fresh one."""
        if job.worker is not None:
            job.worker.signal(signal.SIGCONT)
            self._paused.remove(job)
            if job.mark is not None:
                job.mark = (now, *job.mark[1:])  # the time it sat paused is not its own
        else:
            self._queued.remove(job)
            with self._lock:
                worker = self._idle.pop() if self._idle else None
            if worker is None:
                self._enforce_memory(headroom=self._spare_rss)  # room first: a fork adds a worker's RSS at once
                worker = self._spawn()
            if worker is None:
                job.on_done(Outcome("no grading worker can start", CRASHED, now - job.submitted))
                return
            try:
                worker.conn.send_bytes(job.payload)
            except OSError:
                self._discard(worker)
                job.on_done(Outcome(_DIED, CRASHED, now - job.submitted))
                return
            job.worker = worker
            usage = worker.usage()
            job.mark = None if usage is None else (now, *usage)
        job.slice = 0.0
        self._running.append(job)

    def _pause(self, job: _Job) -> None:
        assert job.worker is not None
        job.worker.signal(signal.SIGSTOP)
        self._running.remove(job)
        self._paused.append(job)

    def _dispatch(self, now: float) -> None:
        """Run the waiting jobs that have used least: pause running ones past their slice,
        and at the process cap evict the paused job that has used most."""
        while (candidate := self._candidate()) is not None:
            if len(self._running) >= self.size:
                victims = [j for j in self._running if j.slice >= QUANTUM and j.served > candidate.served]
                if not victims:
                    return
                self._pause(max(victims, key=lambda j: j.served))
            if candidate.worker is None and not self._room():
                self._evict(max(self._paused, key=lambda j: j.served))
            self._start(candidate, now)

    def _shutdown(self) -> None:
        for job in self._queued + self._running + self._paused:
            if job.worker is not None:
                job.worker.kill()
            job.on_done(Outcome(_CLOSED, CRASHED, time.monotonic() - job.submitted))
        self._queued, self._running, self._paused = [], [], []
        with self._lock:
            idle, self._idle = self._idle, []
            for job in self._inbox:
                job.on_done(Outcome(_CLOSED, CRASHED, time.monotonic() - job.submitted))
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
    # only JSON's true is "equivalent": a truthy reply of another type ("false", [0]) is not
    return Verdict(outcome.status == "ok" and outcome.value is True, status, outcome.seconds)


@dataclass(frozen=True)
class Kind:
    """A kind of grading job: the modules its workers preload, and whether a worker may take
    another job after one (``reuse_workers``). Reuse is for graders that only parse the answer
    (math-verify); a grader that runs it (reasoning-gym's ``score_answer`` ``eval``s some answers)
    gets a fresh worker, forked from the clean template, for every job: the default."""

    preload: tuple[str, ...]
    reuse_workers: bool = False


#: each kind of shared pool
POOL_KINDS: dict[str, Kind] = {
    "math": Kind(("gem_envs_math.verify",), reuse_workers=True),
    "reasoning_gym": Kind(("gem_envs_math.rg_score",)),
}


def _declared_reuse(preload: Sequence[str]) -> bool:
    return any(kind.preload == tuple(preload) and kind.reuse_workers for kind in POOL_KINDS.values())
_shared: dict[str, GradingPool] = {}
_shared_pid: int | None = None
_shared_lock = threading.Lock()


def shared_pool(kind: str = "math") -> GradingPool:
    """The process-wide pool for ``kind`` of job (created on first use): every math env
    grades through ``shared_pool("math")``.

    Its size comes from ``GEM_MATH_GRADER_WORKERS`` (default: CPU count, at most 4), its
    memory budget from ``GEM_MATH_GRADER_MEMORY_BUDGET_MB`` (default
    :data:`DEFAULT_MEMORY_BUDGET_MB`).
    """
    global _shared_pid
    with _shared_lock:
        # a forked child must not share its parent's pipes: it gets pools of its own
        if _shared_pid != os.getpid():
            _shared.clear()
            _shared_pid = os.getpid()
        if kind not in _shared or _shared[kind].closed:
            declared = POOL_KINDS[kind]
            _shared[kind] = GradingPool(preload=declared.preload, reuse_workers=declared.reuse_workers)
        return _shared[kind]


def sandboxed() -> list[tuple[str, str, str]]:
    """What ``gem sandbox`` shows of this suite (entry point ``gem_tools.sandboxed``): where
    a pool's grading workers run here, and why, found by starting one."""
    with GradingPool(workers=1) as pool:
        return [("math grader workers", *pool.isolation())]


@atexit.register
def _close_shared() -> None:
    if _shared_pid == os.getpid():
        for pool in _shared.values():
            pool.close()
