"""The grading pool's worker processes: how one is born, what it runs, what it may send back.

- **A warm template.** Workers are forked from a template process that imported the grading
  modules once (a fork server, started as ``python -m gem_envs_math.workers``), so replacing a
  killed worker costs milliseconds, not the seconds of a fresh interpreter importing sympy.
  Where gem-tools is installed and a sandbox works, the template runs in it (gem-tools'
  :mod:`~gem_tools.sandbox.helper`), so every worker is born isolated: no network, read-only
  files, a private ``/tmp``, an unprivileged uid. :class:`Template` is the one place workers
  are started.
- **Supervised from outside.** A :class:`Worker` is signalled through its pidfd (a pid of the
  sandbox's own namespace would name another process here) and measured through its pid here
  (``/proc``: CPU time, time waited for a CPU, resident memory); the scheduler
  (:mod:`gem_envs_math.pool`) decides what to pause, kill or replace.
- **Data back, never code.** Jobs go to a worker as pickles (from the trusted pool); a worker
  replies in JSON, at most :data:`MAX_REPLY_BYTES`, checked by :func:`parse_reply`: a worker
  runs the answer's code where a grader ``eval``s it, so what it sends is data. The template is
  not dumpable (a worker cannot ptrace it) and forks only while its rlimits, nice value,
  scheduling policy and affinity are as they started; a worker that changed them ends the
  template, and the next fork starts a fresh one.

The template is a plain subprocess, not a :mod:`multiprocessing` process started by
:func:`gem.vector.process.default_start_method` as the env host's workers are: a sandbox is
entered by exec, which ``fork`` is not, and ``spawn``/``forkserver`` re-run the caller's
``__main__`` (see :class:`Template`). So a template that cannot start has no
``__main__``-guard hint to give, as the host's workers do, only its exit code.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import pickle
import resource
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from gem.errors import install_hint

#: seconds the template process may take to start (imports sympy) before the pool gives up
_START_TIMEOUT = 120.0
_READY = b"ready"
#: the longest reply a worker may send (bytes of JSON): a longer one is that job's failure
MAX_REPLY_BYTES = 1 << 20
#: seconds the template may take to fork a worker before the pool starts a new template (a
#: worker that stopped its template with SIGSTOP costs one restart, never a hung scheduler)
_FORK_TIMEOUT = 10.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _resolve(function: str) -> Any:
    module, _, name = function.partition(":")
    return getattr(importlib.import_module(module), name)


def _serve(jobs: Connection) -> None:
    """Loop of a worker: receive ``(function, args)`` (a pickle from the trusted pool), reply
    ``[ok, value]`` as JSON: what the pool reads back is data, never code (:func:`parse_reply`)."""
    functions: dict[str, Any] = {}
    while True:
        try:
            function, args = pickle.loads(jobs.recv_bytes())
        except (EOFError, OSError):
            return
        try:
            if function not in functions:
                functions[function] = _resolve(function)
            reply: list[Any] = [True, functions[function](*args)]
        except Exception as exc:  # reported to the caller as an "error" outcome
            reply = [False, f"{type(exc).__name__}: {exc}"[:2000]]
        try:
            data = json.dumps(reply).encode()
        except (TypeError, ValueError) as exc:
            data = json.dumps([False, f"the result is not plain data (JSON): {exc}"[:2000]]).encode()
        jobs.send_bytes(data)


def parse_reply(data: bytes) -> tuple[bool, Any]:
    """A worker's reply ``[ok, value]``, checked: JSON only, ``ok`` a bool, an error's value a
    string. Raises ValueError for anything else: a worker runs the answer's code (a
    reasoning-gym scorer ``eval``s it), so its reply is parsed as data, never unpickled."""
    try:
        reply = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: a nesting bomb
        raise ValueError(f"not JSON ({exc})") from None
    if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[0], bool)):
        raise ValueError("not a [ok, value] pair")
    if not reply[0] and not isinstance(reply[1], str):
        raise ValueError("an error whose message is not a string")
    return reply[0], reply[1]


def _not_dumpable() -> None:
    """PR_SET_DUMPABLE 0 (inherited by forks): a worker running as the same uid can then not
    ptrace the template or its siblings, nor write their memory through /proc/PID/mem."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


#: every rlimit this platform has: the template checks them before each fork
_RLIMITS = sorted({getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_")})


def _inherited() -> tuple[Any, ...]:
    """The scheduling and resource state a forked worker inherits from the template: every
    rlimit, the nice value, the scheduling policy and the CPU affinity (where the OS has them)."""
    state: list[Any] = [tuple(resource.getrlimit(limit) for limit in _RLIMITS), os.getpriority(os.PRIO_PROCESS, 0)]
    if hasattr(os, "sched_getaffinity"):
        state += [os.sched_getscheduler(0), frozenset(os.sched_getaffinity(0))]
    return tuple(state)


def _template_main(control_fd: int, memory_mb: int, preload: Sequence[str]) -> None:
    """The fork server: import ``preload`` once, then fork one worker per request.

    A preloaded module may define ``warm_up()``: it runs here, once, so that lazy
    initialisation (parser tables, caches) is inherited by every worker instead of being
    paid in each. A request is one byte with a socket attached (SCM_RIGHTS); the child
    serves jobs on that socket, the reply is one byte with a pidfd of the child attached
    (a pid would be the sandbox's own, where the template runs in a pid namespace).
    Children are reaped by the kernel (SIGCHLD ignored), so killed workers never linger
    as zombies.
    """
    control = socket.socket(fileno=control_fd)
    _not_dumpable()
    for name in preload:
        module = importlib.import_module(name)  # before READY: imports never count against a timeout
        if callable(getattr(module, "warm_up", None)):
            module.warm_up()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    # a worker runs as the template's uid, so it can prlimit, renice or re-pin the template (and
    # every later worker would inherit that): the template forks only while it is as it started
    started = _inherited()
    control.sendall(_READY)
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 1, 1)
        except OSError:
            return
        if not fds:
            return  # the pool closed its end
        if _inherited() != started:
            return  # the pool reads EOF and starts a fresh template
        pid = os.fork()
        if pid == 0:
            control.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if memory_mb and sys.platform.startswith("linux"):
                limit = memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            try:
                _serve(Connection(fds[0]))
            finally:
                os._exit(0)
        os.close(fds[0])
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # died at once: the reply is without one, its socket reads EOF
            control.sendall(b"d")
            continue
        socket.send_fds(control, [b"p"], [pidfd])
        os.close(pidfd)


def _host_pid(pidfd: int) -> int:
    """The pid, in this process's pid namespace, of the process ``pidfd`` refers to (-1: it
    is gone)."""
    with open(f"/proc/self/fdinfo/{pidfd}", encoding="ascii") as info:
        for line in info:
            if line.startswith("Pid:"):
                return int(line.split()[1])
    raise OSError("this kernel's fdinfo does not say a pidfd's pid")


class Worker:
    """One forked worker: its job socket, a pidfd to signal it safely (None: it died at
    once, its socket reads EOF and the job is "crashed"), its pid here (``/proc`` reads),
    and its last sampled resident memory (``rss``, bytes)."""

    def __init__(self, pidfd: int | None, conn: Connection) -> None:
        self.pidfd = pidfd
        self.pid = -1 if pidfd is None else _host_pid(pidfd)
        self.conn = conn
        self.rss = 0

    def usage(self) -> tuple[float, float | None] | None:
        """Seconds it has run on a CPU and waited for one (None where the kernel does not
        say), or None if it is gone."""
        try:
            with open(f"/proc/{self.pid}/schedstat", "rb") as stats:
                ran, waited = stats.read().split()[:2]
            return int(ran) / 1e9, int(waited) / 1e9
        except (OSError, ValueError):
            pass
        try:  # a kernel without schedstat: user plus system time, in clock ticks
            with open(f"/proc/{self.pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS, None
        except (OSError, ValueError, IndexError):
            return None

    def measure_rss(self) -> int:
        """Sample its resident memory into ``rss`` (kept as it was if it is gone)."""
        try:
            with open(f"/proc/{self.pid}/statm", "rb") as statm:
                self.rss = int(statm.read().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            pass
        return self.rss

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



def _helper_launch(args: list[str], env: dict[str, str]) -> tuple[Any, str]:
    """gem-tools' launch of a sandboxed helper running ``python -s ARGS``, and the backend's
    name; or None and why none can start here."""
    try:
        from gem_tools.sandbox import SandboxUnavailableError, resolve_backend
        from gem_tools.sandbox.helper import helper_launch
    except ImportError:
        return None, f"gem-tools is not installed (install it {install_hint('gem-tools')})"
    try:
        backend = resolve_backend("auto").name
        return helper_launch(args, backend=backend, env=env), backend
    except (SandboxUnavailableError, OSError, ValueError) as exc:
        return None, str(exc).split(". ")[0]


class Template:
    """The fork-server process, started as ``python -m gem_envs_math.workers``: in gem-tools'
    sandbox where one works (``sandbox=None``; ``True`` requires it, ``False`` never), so
    that every worker forked from it is born in that isolation (no network, read-only
    system and packages, a private ``/tmp``, an unprivileged uid), else as a plain process.

    A plain subprocess rather than ``multiprocessing``: spawn and forkserver re-import the
    parent's ``__main__``, which breaks user scripts without an ``if __name__`` guard, and
    forking the caller is unsafe once threads run. The template itself runs no threads,
    so forking it is safe. A sandboxed template dies with the thread that started it: the
    pool's scheduler thread starts it.
    """

    def __init__(self, memory_mb: int | None, preload: Sequence[str], sandbox: bool | None = None) -> None:
        #: where its workers run: ``"bwrap sandbox"`` or ``"unshare sandbox"``, or ``"unsandboxed"``
        self.isolation = "unsandboxed"
        #: why it runs so
        self.why = "turned off: GEM_MATH_GRADER_SANDBOX=0 or GradingPool(sandbox=False)"
        if sandbox is not False:
            try:
                self._start(memory_mb, preload, sandboxed=True)
                return
            except RuntimeError as exc:
                if sandbox:
                    raise
                self.why = str(exc)
        self._start(memory_mb, preload, sandboxed=False)

    def _start(self, memory_mb: int | None, preload: Sequence[str], sandboxed: bool) -> None:
        ours, theirs = socket.socketpair()
        args = ["-m", "gem_envs_math.workers", str(theirs.fileno()), str(memory_mb or 0), *preload]
        # one thread per worker: BLAS thread pools would only reserve address space
        # (which the memory limit counts) for nothing
        threads = dict.fromkeys(("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1")
        popen: dict[str, Any] = {"env": {**os.environ, **threads}}
        argv = [sys.executable, *args]
        launch = None
        if sandboxed:
            launch, name = _helper_launch(args, threads)
            if launch is None:
                ours.close()
                theirs.close()
                raise RuntimeError(f"no sandbox for the grading workers: {name}")
            argv = launch.argv
            popen = {"env": launch.env, "cwd": launch.cwd, "user": launch.user, "group": launch.group,
                     "extra_groups": [] if launch.user is not None else None}  # fmt: skip
        try:
            self.process = subprocess.Popen(argv, pass_fds=(*(launch.pass_fds if launch else ()), theirs.fileno()),
                                            stdin=subprocess.DEVNULL, start_new_session=True, **popen)  # fmt: skip
        finally:
            theirs.close()
            if launch is not None:
                launch.close()
        self.control = ours
        poller = select.poll()  # not select.select: a busy process's fds run past FD_SETSIZE (1024)
        poller.register(ours, select.POLLIN)
        ready = bool(poller.poll(_START_TIMEOUT * 1000)) and ours.recv(len(_READY)) == _READY
        if not ready:
            try:
                code = self.process.wait(timeout=5)  # it closed the socket: it is exiting
            except subprocess.TimeoutExpired:
                code = None
            self.close()
            why = f"exited with code {code} (its error is on stderr)" if code and code > 0 else "did not start in time"
            where = f" in a sandbox ({name})" if sandboxed else ""
            raise RuntimeError(f"a grading worker preloading {list(preload)}{where} {why}")
        if sandboxed:
            self.isolation, self.why = f"{name} sandbox", "forked from a grading template kept in the sandbox"

    def fork(self) -> Worker:
        """A fresh worker (raises OSError if the template is gone)."""
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self.control, [b"f"], [theirs.fileno()])
            self.control.settimeout(_FORK_TIMEOUT)  # a stopped template raises (TimeoutError is an OSError)
            try:
                reply, fds, _, _ = socket.recv_fds(self.control, 1, 1)
            finally:
                self.control.settimeout(None)
            if not reply:
                raise OSError("the grading template process exited")
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return Worker(fds[0] if fds else None, Connection(ours.detach()))

    def close(self) -> None:
        self.control.close()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)  # its session: a sandbox's launcher and what it started
        except (ProcessLookupError, PermissionError):
            self.process.kill()
        self.process.wait()



if __name__ == "__main__":
    _template_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
