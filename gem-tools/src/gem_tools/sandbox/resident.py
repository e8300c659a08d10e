"""Resident runs: one long-lived warm run of the caller's own script, that serves many requests.

A warm run (:class:`~gem_tools.sandbox.warm.WarmProcess`) is one fork per request and talks
through asyncio pipes that belong to the event loop that started it. A resident run is forked
from a zygote once and kept: the caller's trusted script (a judge that runs a dataset's tests,
say) reads one request after another from its stdin. Its pipes are plain non-blocking fds,
waited on with whatever loop is running at the time, so it outlives the loop that started it
(a sync ``step`` runs a loop per call).

It runs in the same isolation and under the same rlimits as any warm run, except that it has
no wall-clock or CPU limit of its own: the caller bounds each request (and kills the run when a
request overruns). Nothing untrusted may run in it: state it keeps crosses from one request to
the next by design. Its stderr goes to a memory file, which :meth:`ResidentRun.stderr` reads.

>>> run = await Sandbox().start_resident("import sys\\nfor line in sys.stdin: print(line[::-1])")  # doctest: +SKIP
>>> run.send(b"abc\\n"); await run.readline(); await run.kill()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import select
import signal
import time

from gem_tools.sandbox.limits import CEILINGS, Limits
from gem_tools.sandbox.result import SandboxResult, Status
from gem_tools.sandbox.runner import LINE_LIMIT
from gem_tools.sandbox.warm import REPLY_TIMEOUT, Pool, Zygote, ZygoteLost, _set_done, fork_run

#: the most of its stderr a resident run keeps (it is emptied between requests by :meth:`ResidentRun.clear_stderr`)
STDERR_KEPT = 64 << 10


class ResidentRun:
    """A started resident run; end it with :meth:`kill` (or :meth:`destroy` from sync code)."""

    def __init__(self, pool: Pool, zygote: Zygote, pidfd: int, stdin: int, stdout: int, errors: int,
                 backend: str) -> None:  # fmt: skip
        self.pool, self.zygote, self.pidfd = pool, zygote, pidfd
        self.stdin, self.stdout, self.errors = stdin, stdout, errors
        self.backend = backend
        self.owner = os.getpid()
        self._in = bytearray()
        self._out = bytearray()
        self._writer: asyncio.AbstractEventLoop | None = None
        self._eof = False
        #: how it ended, once :meth:`kill` has run (stdout is the caller's: empty here)
        self.result: SandboxResult | None = None
        self.started = time.monotonic()

    @classmethod
    async def start(cls, pool: Pool, code: str, limits: Limits) -> ResidentRun:
        """Fork ``code`` (``main.py``, compiled once by the zygote) from a zygote of ``pool`` with ``limits``'
        memory, file, process and open-file limits and neither a wall-clock nor a CPU limit. Raises
        :class:`~gem_tools.sandbox.warm.WarmUnavailable` when no zygote starts here, :class:`ZygoteLost` when
        the one taken died."""
        limits = limits.with_(cpu_time=CEILINGS["cpu_time"])
        zygote = await pool.acquire()
        stdin, stdout = os.pipe(), os.pipe()
        errors = os.memfd_create("gem-resident-stderr")
        fcntl.fcntl(errors, fcntl.F_SETFL, fcntl.fcntl(errors, fcntl.F_GETFL) | os.O_APPEND)
        try:
            pidfd = await fork_run(zygote, {"main.py": code.encode()}, ["main.py"], limits, True,
                                   (stdin[0], stdout[1], os.dup(errors)))  # fmt: skip
        except BaseException:
            for fd in (stdin[1], stdout[0], errors):
                os.close(fd)
            zygote.destroy()
            raise
        for fd in (stdin[1], stdout[0]):
            os.set_blocking(fd, False)
        return cls(pool, zygote, pidfd, stdin[1], stdout[0], errors, pool.backend.name)

    # -- talking -------------------------------------------------------------------------
    def alive(self) -> bool:
        """The run has not exited (nor been killed)."""
        if self.result is not None or self.owner != os.getpid():
            return False
        poller = select.poll()  # not select.select: a busy process's fds run past FD_SETSIZE (1024)
        poller.register(self.pidfd, select.POLLIN)
        return not poller.poll(0)

    def send(self, data: bytes) -> None:
        """Write ``data`` to the run's stdin; what the pipe does not take now is written by the running
        loop as the run reads (a run that has gone drops it)."""
        if self.result is not None:
            return
        self._out += data
        self._flush()
        if self._out and self._writer is None:
            self._writer = asyncio.get_running_loop()
            self._writer.add_writer(self.stdin, self._flush)

    def _flush(self) -> None:
        try:
            while self._out:
                self._out = self._out[os.write(self.stdin, self._out):]
        except BlockingIOError:
            return
        except OSError:  # the run closed its stdin or is gone
            self._out.clear()
        if self._writer is not None and not self._out:
            self._stop_writing()

    def _stop_writing(self) -> None:
        loop, self._writer = self._writer, None
        if loop is not None and not loop.is_closed():
            loop.remove_writer(self.stdin)

    @property
    def pending(self) -> bool:
        """Some of what was sent is not yet in the pipe."""
        return bool(self._out)

    async def readline(self) -> bytes:
        """The next line of the run's stdout; ``b""`` once it is closed. Raises ``ValueError`` for a
        line longer than :data:`~gem_tools.sandbox.runner.LINE_LIMIT`."""
        while True:
            end = self._in.find(b"\n")
            if end >= 0:
                line = bytes(self._in[: end + 1])
                del self._in[: end + 1]
                return line
            if len(self._in) > LINE_LIMIT:
                raise ValueError(f"a line of more than {LINE_LIMIT} bytes")
            if self._eof:
                line, self._in = bytes(self._in), bytearray()
                return line
            try:
                chunk = os.read(self.stdout, 1 << 16)
            except BlockingIOError:
                await _readable(self.stdout)
                continue
            if not chunk:
                self._eof = True
            self._in += chunk

    def stderr(self) -> str:
        """What the run wrote to stderr since the last :meth:`clear_stderr`."""
        try:
            size = os.fstat(self.errors).st_size
            return os.pread(self.errors, STDERR_KEPT, max(0, size - STDERR_KEPT)).decode(errors="replace")
        except OSError:
            return ""

    def clear_stderr(self) -> bool:
        """Empty the stderr file; False when it held more than :data:`STDERR_KEPT` (the caller should not
        keep such a run)."""
        try:
            full = os.fstat(self.errors).st_size > STDERR_KEPT
            os.ftruncate(self.errors, 0)
        except OSError:
            return False
        return not full

    # -- ending ----------------------------------------------------------------------------
    async def kill(self) -> SandboxResult:
        """Kill the run, collect its exit status from the zygote and give the zygote back to its pool
        (which it rejoins once it has cleaned up after the run)."""
        if self.result is not None:
            return self.result
        self._stop_writing()
        code: int | None = None
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        zygote, self.zygote = self.zygote, None
        if zygote is not None and self.owner == os.getpid():
            try:
                message, fds = await zygote.recv(REPLY_TIMEOUT)
                for fd in fds:
                    os.close(fd)
                code = int(message["exit"])
            except (ZygoteLost, KeyError, TypeError, ValueError):
                zygote.destroy()
            else:
                zygote.ready = False
                self.pool.release(zygote)
        self.result = self._ended(code)
        self._close()
        return self.result

    def destroy(self) -> None:
        """Sync :meth:`kill` for where no loop runs (exit, a pool's cleanup): the zygote goes too."""
        if self.result is not None:
            return
        self._stop_writing()
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            if self.owner == os.getpid():
                zygote.destroy()
            else:  # a forked copy of the owner: its parent's zygote is not ours to kill
                zygote.sock.close()
                try:
                    os.close(zygote.errors)
                except OSError:
                    pass
        self.result = self._ended(None)
        self._close()

    def _ended(self, code: int | None) -> SandboxResult:
        if code is not None and 128 < code <= 128 + 64:
            code = -(code - 128)  # a signal, as the zygote reports it (bwrap's 128 + N)
        status = Status.OK if code == 0 else Status.KILLED if code is None or code < 0 else Status.ERROR
        return SandboxResult(status=status, exit_code=code, stdout="", stderr=self.stderr(),
                             duration=time.monotonic() - self.started, backend=self.backend)  # fmt: skip

    def _close(self) -> None:
        for fd in (self.pidfd, self.stdin, self.stdout, self.errors):
            try:
                os.close(fd)
            except OSError:
                pass


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    loop.add_reader(fd, _set_done, future)
    try:
        await future
    finally:
        loop.remove_reader(fd)
