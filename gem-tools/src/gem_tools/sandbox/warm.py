"""Warm sandboxes: Python runs forked from a zygote that already sits in the sandbox.

A cold run starts the sandbox (bwrap or unshare), an interpreter and its imports for
each program. A warm run asks a zygote (``_zygote.py``) that was started once, in the
same isolation and with the same interpreter, package view and environment, to fork:
the child gets the run's own rlimits and cgroup caps (where :func:`cgroups.support`
allows a cgroup: the zygote's, which each run re-caps for itself), fresh
stdin/stdout/stderr and a fresh ``__main__``, in the zygote's empty working dir. A
zygote serves one run at a time, so concurrent runs never share a writable filesystem;
after each run it kills what the run left running and wipes its ``/tmp`` before it
takes the next. A run can signal its zygote (they share a uid): that costs a
fresh zygote, never another run's isolation, since whatever the parent cannot confirm
(no exit report, no "ready") makes it kill that zygote's whole sandbox.

Zygotes are kept per :class:`Pool` key (backend, interpreter, packages, environment,
``/tmp`` size), spawned when no idle one is free and kept for the next run.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import json
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gem_tools.sandbox import cgroups
from gem_tools.sandbox.backends import Backend, Job, Launch, _rlimits
from gem_tools.sandbox.layout import Interpreter
from gem_tools.sandbox.limits import CEILINGS, Limits
from gem_tools.sandbox.runner import Process, kill_uid
from gem_tools.sandbox.seccomp import keyring_filter

_SOURCE = Path(__file__).with_name("_zygote.py").read_text(encoding="utf-8")
#: idle zygotes kept per pool; one freed while this many wait is stopped
MAX_IDLE = 64
#: how long a zygote may take to start, and to answer once its run is over
START_TIMEOUT = 30.0
REPLY_TIMEOUT = 5.0
#: room above a zygote's memory at its start for what it holds later (compiled scripts)
BASELINE_SLACK = 8 << 20
#: rlimits of the zygote itself: only ceilings for the runs, which lower them
_ZYGOTE_LIMITS = CEILINGS
#: what a zygote's start is taken to cost before one was timed (seconds)
_FIRST_SPAWN_GUESS = 0.2
_NO_ANSWER = "zygote did not answer in time"


class WarmUnavailable(RuntimeError):
    """No zygote could be started for this configuration (the cold path is used)."""


class ZygoteLost(RuntimeError):
    """A zygote died, hung or answered out of turn."""


def _set_done(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


class Zygote:
    """One started zygote and its control socket."""

    def __init__(self, popen: subprocess.Popen, sock: socket.socket, errors: int, host_uid: int | None,
                 group: cgroups.RunGroup | None) -> None:  # fmt: skip
        self.popen = popen
        #: the zygote's cgroup, which its runs are born in (each run sets its limits)
        self.group = group
        self.sock = sock
        self.errors = errors
        self.host_uid = host_uid
        self.owner = os.getpid()
        #: False from the end of a run until the zygote says it has cleaned up after it
        self.ready = True
        #: when its last run ended (its cleanup began)
        self.dirty_since = 0.0
        #: the memory the zygote's cgroup holds before any run: a run may add ``run_memory``
        self.baseline = 0

    def send(self, data: bytes, fds: tuple[int, ...] = ()) -> None:
        try:
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.send(data)
        except OSError as exc:
            raise ZygoteLost(f"zygote gone: {exc}") from None

    async def recv(self, timeout: float) -> tuple[dict[str, Any], list[int]]:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 4096, 4)
            except BlockingIOError:
                future = loop.create_future()
                loop.add_reader(self.sock.fileno(), _set_done, future)
                try:
                    await asyncio.wait_for(future, max(0.0, deadline - time.monotonic()))
                except asyncio.TimeoutError:
                    raise ZygoteLost(_NO_ANSWER) from None
                finally:
                    loop.remove_reader(self.sock.fileno())
                continue
            except OSError as exc:
                raise ZygoteLost(f"zygote gone: {exc}") from None
            if not data:
                for fd in fds:
                    os.close(fd)
                raise ZygoteLost("zygote exited")
            try:
                return json.loads(data), fds
            except ValueError:
                for fd in fds:
                    os.close(fd)
                raise ZygoteLost("zygote sent garbage") from None

    def stderr(self) -> str:
        try:
            os.lseek(self.errors, 0, os.SEEK_SET)
            return os.read(self.errors, 4000).decode(errors="replace").strip()
        except OSError:
            return ""

    def destroy(self) -> None:
        """Kill the zygote's whole sandbox (every process in it dies with it)."""
        if self.owner == os.getpid():
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self.group is not None:
                self.group.kill()
            if self.host_uid is not None:
                kill_uid(self.host_uid)
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
            if self.group is not None:
                for _ in range(100):
                    if self.group.kill() and self.group.remove():
                        break
                    time.sleep(0.002)
        self.sock.close()
        try:
            os.close(self.errors)
        except OSError:
            pass


def preload_names(interpreter: Interpreter) -> list[str]:
    """Import names of the allowed packages, which a zygote imports before its first run."""
    names = []
    for _host, inside in interpreter.packages:
        name = os.path.basename(inside)
        if name.endswith(".py"):
            name = name[:-3]
        if name.isidentifier():
            names.append(name)
    return names


_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    """The thread that starts every zygote of this process, kept for the process's life. A sandbox dies with
    the thread that started it (bwrap's ``--die-with-parent`` is the kernel's parent-death signal, sent when
    that *thread* exits): a zygote started from a short-lived thread (a thread pool's worker, ``run_sync``'s
    helper thread) was killed when the thread ended, with whatever run it was serving then (a right answer
    scored 0, "killed by signal 9")."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="gem-zygote-spawner")
        return _SPAWNER


async def spawn(backend: Backend, interpreter: Interpreter, env: dict[str, str], tmp_size: int) -> Zygote:
    """Start a zygote in ``backend``'s isolation (from :func:`_spawner`'s thread) and wait until it is ready."""
    if keyring_filter() is None:  # runs of one zygote share its uid's keyrings: never without the filter
        raise WarmUnavailable(f"no keyring filter for this machine ({os.uname().machine})")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    argv = [interpreter.executable, "-s", "-c", _SOURCE, str(theirs.fileno()), ",".join(preload_names(interpreter))]
    launch: Launch = backend.launch(Job(argv, {}, env, Limits(tmp_size=tmp_size, **_ZYGOTE_LIMITS), interpreter))
    errors = os.memfd_create("gem-zygote-stderr")
    group = _zygote_group()
    try:
        started = _spawner().submit(
            subprocess.Popen, (group.enter_argv() if group else []) + launch.argv, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=errors, env=launch.env, cwd=launch.cwd,
            pass_fds=(*launch.pass_fds, theirs.fileno()), user=launch.user, group=launch.group,
            extra_groups=[] if launch.user is not None else None, start_new_session=True,
        )  # fmt: skip
    except RuntimeError as exc:  # the interpreter is shutting down: no new threads' work (the cold path runs)
        theirs.close()
        launch.close()
        failed: Future = Future()
        failed.set_exception(exc)
        _stop_unclaimed(failed, ours, errors, None, group)
        raise WarmUnavailable(f"cannot start a zygote: {exc}") from None
    try:
        popen = await asyncio.wrap_future(started)
    except OSError as exc:
        ours.close()
        os.close(errors)
        if group is not None:
            group.remove()
        raise WarmUnavailable(f"cannot start a zygote: {exc}") from None
    except BaseException:
        # cancelled while it starts: the zygote is stopped once it has (nobody else will)
        started.add_done_callback(lambda done: _stop_unclaimed(done, ours, errors, launch.host_uid, group))
        raise
    finally:
        # the child holds its copies; the spawner has finished with these (or never will start)
        if started.done():
            theirs.close()
            launch.close()
        else:
            started.add_done_callback(lambda _: (theirs.close(), launch.close()))
    ours.setblocking(False)
    zygote = Zygote(popen, ours, errors, launch.host_uid, group)
    try:
        message, fds = await zygote.recv(START_TIMEOUT)
        for fd in fds:
            os.close(fd)
        if message != {"ready": True}:
            raise ZygoteLost(f"unexpected first message {message!r}")
        if group is not None:
            zygote.baseline = group.memory_usage() + BASELINE_SLACK
    except (ZygoteLost, OSError, ValueError) as exc:
        why = zygote.stderr().splitlines()[-1:] or [str(exc)]
        zygote.destroy()
        raise WarmUnavailable(f"the zygote did not start: {why[0]}") from None
    return zygote


def _stop_unclaimed(started: Future, sock: socket.socket, errors: int, host_uid: int | None,
                    group: cgroups.RunGroup | None) -> None:
    """Stop a zygote whose caller was cancelled while it started (or release what was set up for it)."""
    if not started.cancelled() and started.exception() is None:
        Zygote(started.result(), sock, errors, host_uid, group).destroy()
        return
    sock.close()
    os.close(errors)
    if group is not None:
        group.remove()


def _zygote_group() -> cgroups.RunGroup | None:
    """A cgroup for a zygote and its runs, where the host allows one.

    Runs are born in it (moving a process between cgroups waits for an RCU grace period,
    milliseconds on an idle machine), and each run sets its limits: the zygote's own
    usage plus the run's ``run_memory``, and ``processes`` plus the helpers."""
    where = cgroups.support()
    if where.mode == "none":
        return None
    try:
        return cgroups.RunGroup(where, Limits(memory=1 << 40, processes=1 << 15))
    except OSError:
        return None  # e.g. the host's group limit: the rlimits still hold


class Pool:
    """Idle zygotes of one sandbox configuration."""

    def __init__(self, backend: Backend, interpreter: Interpreter, env: dict[str, str], tmp_size: int) -> None:
        self.backend = backend
        self.interpreter = interpreter
        self.env = env
        self.tmp_size = tmp_size
        self.idle: list[Zygote] = []
        self.lock = threading.Lock()
        #: why zygotes cannot start here, once one failed to
        self.broken: str | None = None
        #: seconds a fresh zygote took to start (the latest): the longest a dirty one is waited for
        self.spawn_seconds = _FIRST_SPAWN_GUESS

    async def acquire(self) -> Zygote:
        """An idle zygote that has cleaned up after its last run, else a fresh one. A zygote still cleaning
        is waited for at most as long as a fresh start takes (a run that left 19,000 directories once held the
        next run for the whole reply timeout); it stays in the pool to finish, or is destroyed once its cleanup
        has taken :data:`REPLY_TIMEOUT`."""
        found: Zygote | None = None
        still_cleaning: list[Zygote] = []
        waited = False
        try:
            while found is None:
                with self.lock:
                    if not self.idle:
                        break
                    zygote = self.idle.pop(0)  # the longest idle: the likeliest to have cleaned up
                if zygote.ready:
                    found = zygote
                    break
                # one short wait in all: a fresh start is what it would cost otherwise
                limit = 0.0 if waited else self.spawn_seconds
                waited = True
                state = await _cleaned_up(zygote, limit, destroy_after=REPLY_TIMEOUT)
                if state == "ready":
                    found = zygote
                elif state == "cleaning":
                    still_cleaning.append(zygote)
        finally:
            for zygote in still_cleaning:
                self._keep(zygote)
        if found is not None:
            return found
        with self.lock:
            if self.broken is not None:
                raise WarmUnavailable(self.broken)
        started = time.monotonic()
        try:
            zygote = await spawn(self.backend, self.interpreter, self.env, self.tmp_size)
        except WarmUnavailable as exc:
            self.broken = str(exc)
            raise
        self.spawn_seconds = time.monotonic() - started
        return zygote

    def _keep(self, zygote: Zygote) -> None:
        """Put a zygote back among the idle ones (at the end: it is the least likely to be ready)."""
        with self.lock:
            if len(self.idle) < MAX_IDLE:
                self.idle.append(zygote)
                return
        zygote.destroy()

    def release(self, zygote: Zygote) -> None:
        with self.lock:
            if len(self.idle) < MAX_IDLE and zygote.owner == os.getpid():
                if not zygote.ready:
                    zygote.dirty_since = time.monotonic()
                self.idle.append(zygote)
                return
        zygote.destroy()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for zygote in idle:
            zygote.destroy()


async def _cleaned_up(zygote: Zygote, timeout: float, destroy_after: float) -> str:
    """Wait up to ``timeout`` for the zygote's "ready" after a run: ``"ready"``, ``"cleaning"`` (not yet), or
    ``"lost"`` (it said something else, exited, or has been cleaning for ``destroy_after``: destroyed)."""
    try:
        message, fds = await zygote.recv(timeout)
        for fd in fds:
            os.close(fd)
        if message != {"ready": True}:
            raise ZygoteLost("not ready")
    except ZygoteLost as exc:
        if str(exc) == _NO_ANSWER and time.monotonic() - zygote.dirty_since < destroy_after:
            return "cleaning"
        zygote.destroy()
        return "lost"
    except BaseException:
        zygote.destroy()
        raise
    zygote.ready = True
    return "ready"


_POOLS: dict[tuple[Any, ...], Pool] = {}
_POOLS_LOCK = threading.Lock()


def pool_for(backend: Backend, interpreter: Interpreter, env: dict[str, str], tmp_size: int) -> Pool:
    """The shared pool of this configuration (made on first use)."""
    key = (backend.name, interpreter, tuple(sorted(env.items())), tmp_size)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = Pool(backend, interpreter, dict(env), tmp_size)
        return pool


def close_pools() -> None:
    """Stop every idle zygote of this process."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
    for pool in pools:
        pool.close()


def _forget_pools() -> None:
    # a forked copy of this process must not talk to its parent's zygotes (nor use its spawner, whose thread
    # the fork did not copy)
    global _SPAWNER, _SPAWNER_LOCK
    _SPAWNER, _SPAWNER_LOCK = None, threading.Lock()
    for pool in _POOLS.values():
        for zygote in pool.idle:
            zygote.sock.close()
            os.close(zygote.errors)
        pool.idle = []
        pool.lock = threading.Lock()
    _POOLS.clear()


os.register_at_fork(after_in_child=_forget_pools)
atexit.register(close_pools)


def run_rlimits(limits: Limits) -> dict[str, list[int]]:
    """The rlimits a warm run sets on itself: a cold run's, with the zygote counted
    among the uid's processes and no POSIX message queues (they would outlive the run)."""
    found = _rlimits(limits)
    found["RLIMIT_NPROC"] = [limits.processes + 1] * 2
    found["RLIMIT_MSGQUEUE"] = [0, 0]
    return found


async def fork_run(zygote: Zygote, files: dict[str, bytes], argv: list[str], limits: Limits, trusted_main: bool,
                   stdio: tuple[int, int, int]) -> int:  # fmt: skip
    """Have ``zygote`` fork one run of ``files`` (``main.py`` among them) with ``limits``, on the run's
    ``stdio`` fds (stdin, stdout, stderr; always closed here, the child holds its copies); its pidfd.
    Raises :class:`ZygoteLost` when the zygote cannot be told its run or does not answer."""
    plan = {"files": {name: base64.b64encode(data).decode() for name, data in files.items()},
            "argv": argv, "rlimits": run_rlimits(limits), "trusted_main": trusted_main}  # fmt: skip
    plan_fd = os.memfd_create("gem-warm-plan")
    theirs = (plan_fd, *stdio)
    try:
        if zygote.group is not None:
            try:
                # a cap below what the group holds makes the kernel reclaim what a
                # previous run left cached first: no run inherits another's allowance
                zygote.group.set_limits(zygote.baseline + (limits.run_memory or 0),
                                        limits.processes + cgroups.HELPER_PIDS)  # fmt: skip
            except (OSError, ValueError) as exc:
                raise ZygoteLost(f"cannot set the run's limits: {exc}") from None
        data = memoryview(json.dumps(plan).encode())
        while data:
            data = data[os.write(plan_fd, data) :]
        zygote.send(b"run", theirs)
    finally:
        for fd in theirs:
            os.close(fd)
    message, fds = await zygote.recv(REPLY_TIMEOUT)
    if "pid" not in message or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        raise ZygoteLost(f"unexpected answer {message!r}")
    return fds[0]


class WarmProcess(Process):
    """A run forked from a zygote of ``pool``; the same interface as a cold :class:`Process`."""

    def __init__(self, pool: Pool, argv: list[str], files: dict[str, bytes], limits: Limits, backend: str,
                 interactive: bool, trusted_main: bool = False) -> None:  # fmt: skip
        super().__init__(Launch([], {}), limits, backend, interactive)
        #: main.py is the caller's own script: the zygote may compile it once for all runs
        self.trusted_main = trusted_main
        self.pool = pool
        self.argv = argv
        self.files = files
        self.zygote: Zygote | None = None
        self._exit_code: int | None = None
        self._reported = False
        self._oom_before = 0
        self._oom: bool | None = None

    async def _start(self) -> tuple[Any, Any, Any]:
        for _attempt in range(3):
            self.zygote = await self.pool.acquire()
            try:
                return await self._fork()
            except ZygoteLost:
                self._lose()  # e.g. an idle zygote that died: nothing of the run started
            except BaseException:
                self._lose()  # cancelled halfway: the zygote's state is unknown
                raise
        raise WarmUnavailable("three zygotes in a row were lost before a run could start")

    async def _fork(self) -> tuple[Any, Any, Any]:
        zygote = self.zygote
        assert zygote is not None
        if zygote.group is not None:
            self._oom_before = zygote.group.oom_kills()
        pipes = [os.pipe() for _ in range(3)]
        mine = [pipes[0][1], pipes[1][0], pipes[2][0]]
        theirs = (pipes[0][0], pipes[1][1], pipes[2][1])
        self.start = time.monotonic()
        try:
            pidfd = await fork_run(zygote, self.files, self.argv, self.limits, self.trusted_main, theirs)
        except BaseException:
            for fd in mine:
                os.close(fd)
            raise
        self._pidfd = pidfd
        return (open(mine[0], "wb", buffering=0), open(mine[1], "rb", buffering=0),
                open(mine[2], "rb", buffering=0))  # fmt: skip

    def _lose(self) -> None:
        if self.zygote is not None:
            self.zygote.destroy()
            self.zygote = None

    def _oom_killed(self) -> bool:
        if self._oom is not None:
            return self._oom
        group = self.zygote.group if self.zygote is not None else None
        return group is not None and group.oom_kills() > self._oom_before

    def _signal_all(self) -> None:
        # the run's leftovers are the zygote's to kill: the cgroup holds the zygote too
        if self._pidfd is not None:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass

    async def _kill(self) -> None:
        """Kill the run; the zygote then reports its exit status and kills the rest."""
        if self._pidfd is None:
            return
        self._signal_all()
        if self.zygote is not None and not self._reported:
            try:
                message, fds = await self.zygote.recv(REPLY_TIMEOUT)
                for fd in fds:
                    os.close(fd)
                self._exit_code = int(message["exit"])
                self._reported = True
            except (ZygoteLost, KeyError, TypeError, ValueError):
                self._oom = self._oom_killed()  # the kernel may have picked the zygote
                self._lose()  # its sandbox, the run included, dies with it
            except BaseException:
                self._lose()
                raise
        if self._exited_at is None:
            self._exited_at = time.monotonic()

    async def _reap(self) -> int | None:
        # a run whose zygote died under it is reported as killed (bwrap's 128 + SIGKILL)
        return self._exit_code if self._reported else 128 + signal.SIGKILL

    async def _done(self) -> None:
        # its "ready" (the cleanup done) is awaited by the next run that takes it
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            zygote.ready = False
            self.pool.release(zygote)
