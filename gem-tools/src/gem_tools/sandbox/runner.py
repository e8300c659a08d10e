"""Run a :class:`Launch` on an asyncio loop: feed stdin, keep capped stdout/stderr, enforce
the wall clock, kill what is left, and classify how the run ended.

Native async I/O: the pipes are asyncio pipe transports and the process's exit is a
pidfd the loop watches, so a thousand runs in flight cost no thread each (asyncio's own
subprocess support would reap the process itself, and this runner must kill the run's
process group *before* the leader is reaped, while its pid cannot be reused). The sync
entry point :func:`execute` drives the same coroutine. Each run gets its own cgroup
where the host allows it (:mod:`gem_tools.sandbox.cgroups`): memory and processes are
then capped for the whole run, and killing the run kills every process in it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from gem_tools.sandbox import cgroups
from gem_tools.sandbox.backends import Launch
from gem_tools.sandbox.limits import Limits
from gem_tools.sandbox.result import SandboxResult, Status

T = TypeVar("T")
# after the program exits, how long stray writers may keep the pipes open
_GRACE = 0.2
#: longest line an interactive run's stdout may send (see Process.readline)
LINE_LIMIT = 16 << 20


class _Stream:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.seen = 0

    def feed(self, chunk: bytes) -> None:
        self.seen += len(chunk)
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.seen > len(self.data)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class _Capture(asyncio.Protocol):
    """Keeps the first ``cap`` bytes of a pipe and tells its run about every change."""

    def __init__(self, stream: _Stream, changed: Any) -> None:
        self.stream = stream
        self.changed = changed
        self.closed = False

    def data_received(self, data: bytes) -> None:
        self.stream.feed(data)
        self.changed()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.changed()


class _Lines(asyncio.StreamReaderProtocol):
    """An interactive run's stdout: a StreamReader the caller reads lines from."""

    def __init__(self, reader: asyncio.StreamReader, changed: Any) -> None:
        super().__init__(reader)
        self.changed = changed
        self.closed = False

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.closed = True
        self.changed()


class Process:
    """A started sandboxed run. Made by :func:`start`; always end it with :meth:`finish`.

    ``interactive`` runs hand their stdout to the caller (:meth:`readline`) and take
    stdin piece by piece (:meth:`send`); the others collect capped stdout themselves.
    """

    def __init__(self, launch: Launch, limits: Limits, backend: str, interactive: bool) -> None:
        self.launch = launch
        self.limits = limits
        self.backend = backend
        self.interactive = interactive
        self.out, self.err = _Stream(limits.output), _Stream(limits.output)
        self.stopped: str | None = None
        self.group: cgroups.RunGroup | None = None
        self._changed = asyncio.Event()
        self._popen: subprocess.Popen | None = None
        self._pidfd: int | None = None
        self._exited_at: float | None = None
        self._transports: list[asyncio.BaseTransport] = []
        self._stdin: asyncio.WriteTransport | None = None
        self._streams: list[_Capture | _Lines] = []
        self._watchdog: asyncio.TimerHandle | None = None
        self.reader: asyncio.StreamReader | None = None
        #: how the run ended, once :meth:`finish` has run
        self.result: SandboxResult | None = None
        self.start = time.monotonic()

    # -- starting ----------------------------------------------------------------------
    def _start_group(self) -> None:
        where = cgroups.support()
        if where.mode != "none":
            try:
                self.group = cgroups.RunGroup(where, self.limits)
            except OSError:
                self.group = None  # e.g. the host's group limit: the rlimits still hold

    async def _start(self) -> tuple[Any, Any, Any]:
        """Start the run's process; its pidfd goes to ``_pidfd``; returns its stdin, stdout, stderr pipes."""
        self._start_group()
        argv = (self.group.enter_argv() if self.group else []) + self.launch.argv
        self.start = time.monotonic()
        try:
            self._popen = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.launch.env,
                cwd=self.launch.cwd, pass_fds=self.launch.pass_fds, user=self.launch.user, group=self.launch.group,
                extra_groups=[] if self.launch.user is not None else None, start_new_session=True,
            )  # fmt: skip
        except BaseException:
            self.launch.close()
            self._remove_group()
            raise
        # the child holds its own copies now
        fds, self.launch.pass_fds = self.launch.pass_fds, ()
        for fd in fds:
            os.close(fd)
        self._pidfd = os.pidfd_open(self._popen.pid)
        popen = self._popen
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        return popen.stdin, popen.stdout, popen.stderr

    async def _spawn(self) -> None:
        loop = asyncio.get_running_loop()
        stdin_pipe, stdout_pipe, stderr_pipe = await self._start()
        assert self._pidfd is not None
        loop.add_reader(self._pidfd, self._on_exit)
        self._watchdog = loop.call_at(loop.time() + self.limits.timeout, self._stop, "timeout")
        if self.interactive:
            self.reader = asyncio.StreamReader(limit=LINE_LIMIT)
            lines = _Lines(self.reader, self._changed.set)
            transport, _ = await loop.connect_read_pipe(lambda: lines, stdout_pipe)
            self._streams.append(lines)
        else:
            capture = _Capture(self.out, self._on_output)
            transport, _ = await loop.connect_read_pipe(lambda: capture, stdout_pipe)
            self._streams.append(capture)
        self._transports.append(transport)
        errors = _Capture(self.err, self._on_output)
        transport, _ = await loop.connect_read_pipe(lambda: errors, stderr_pipe)
        self._streams.append(errors)
        self._transports.append(transport)
        stdin, _ = await loop.connect_write_pipe(asyncio.Protocol, stdin_pipe)
        self._stdin = stdin
        self._transports.append(stdin)

    def _on_exit(self) -> None:
        if self._exited_at is None:
            self._exited_at = time.monotonic()
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
        self._changed.set()

    def _on_output(self) -> None:
        if self.out.seen + self.err.seen > self.limits.output_kill:
            self._stop("output")
        self._changed.set()

    def _stop(self, why: str) -> None:
        if self.stopped is None and self._exited_at is None:
            self.stopped = why
            self._signal_all()
        self._changed.set()

    # -- talking to an interactive run -------------------------------------------------
    def send(self, data: bytes) -> None:
        """Write ``data`` to the run's stdin (buffered; a run that has gone drops it)."""
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.write(data)

    def close_stdin(self) -> None:
        if self._stdin is not None:
            self._stdin.close()

    async def readline(self) -> bytes:
        """The next line of an interactive run's stdout; ``b""`` once it is closed.

        Raises ``ValueError`` for a line longer than :data:`LINE_LIMIT`."""
        assert self.reader is not None, "readline needs an interactive run"
        try:
            return await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial
        except asyncio.LimitOverrunError:
            raise ValueError(f"a line of more than {LINE_LIMIT} bytes") from None

    # -- waiting and ending ------------------------------------------------------------
    async def wait(self) -> None:
        """Until the run has exited and closed its outputs, or was stopped."""
        while self.stopped is None:
            closed = all(s.closed for s in self._streams)
            if self._exited_at is not None:
                if closed:
                    return
                left = self._exited_at + _GRACE - time.monotonic()
                if left <= 0:
                    return  # something outside a pid namespace still holds the pipes
            else:
                left = None
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                pass

    async def finish(self) -> SandboxResult:
        """Kill whatever of the run is left, reap it, clean up, and say how it ended."""
        if self.result is not None:
            return self.result
        if self._watchdog is not None:
            self._watchdog.cancel()
        try:
            await self._kill()
        finally:
            if self._pidfd is not None:
                try:
                    asyncio.get_running_loop().remove_reader(self._pidfd)
                except (ValueError, RuntimeError):
                    pass
                os.close(self._pidfd)
                self._pidfd = None
            returncode = await self._reap()
            for transport in self._transports:
                transport.close()
            self.launch.close()
        duration = (self._exited_at or time.monotonic()) - self.start
        oom = self._oom_killed()
        self._remove_group()
        self.result = _classify(returncode, self.stopped, self.out, self.err, duration, self.launch,
                                self.limits, self.backend, oom)  # fmt: skip
        await self._done()
        return self.result

    def _oom_killed(self) -> bool:
        return self.group is not None and self.group.oom_killed()

    async def _reap(self) -> int | None:
        """The run's exit status once it is gone (``Popen.returncode`` conventions)."""
        assert self._popen is not None
        return self._popen.wait()

    async def _done(self) -> None:
        """After the result is known: give back what the run held."""

    def _signal_all(self) -> None:
        """SIGKILL the run: its cgroup, or its process group and the namespace's pid 1.

        Only while the leader is unreaped: its pid (= process group) is still ours."""
        popen = self._popen
        if popen is None:
            return
        if self.group is not None:
            self.group.kill()
        for pid in _children(popen.pid):
            _sigkill(pid)
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    async def _kill(self) -> None:
        """Kill everything the run started, and wait until it is gone.

        The namespace backends' pid 1 is a child of the leader in a session of its own:
        killing it makes the kernel kill the rest of its namespace, and it only
        disappears once they are all dead, so waiting for it is waiting for them. With a
        cgroup, the group being empty is the proof.
        """
        popen = self._popen
        assert popen is not None
        children = [(pid, _start_time(pid)) for pid in _children(popen.pid)]
        self._signal_all()
        if self.group is None and self.launch.host_uid is not None:
            kill_uid(self.launch.host_uid)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            group_empty = self.group is None or self.group.kill()
            if group_empty and self._exited_at is not None and not any(_alive(p, s) for p, s in children):
                return
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), 0.005)
            except asyncio.TimeoutError:
                pass

    def _remove_group(self) -> None:
        if self.group is not None:
            for _ in range(100):
                if self.group.remove():
                    break
                self.group.kill()
                time.sleep(0.001)
            self.group = None


async def start(launch: Launch, limits: Limits, backend: str, interactive: bool = False) -> Process:
    """Start ``launch``; the caller must ``await process.finish()`` whatever happens."""
    return await begin(Process(launch, limits, backend, interactive))


async def begin(process: Process) -> Process:
    """Spawn ``process``; on failure clean up what was started."""
    try:
        await process._spawn()
    except BaseException:
        if process._pidfd is not None or process._popen is not None:
            await process.finish()
        raise
    return process


async def aexecute(launch: Launch, stdin: bytes, limits: Limits, backend: str) -> SandboxResult:
    """Run ``launch`` to completion under ``limits``; always reaps and cleans up."""
    return await complete(Process(launch, limits, backend, interactive=False), stdin)


async def complete(process: Process, stdin: bytes) -> SandboxResult:
    """Spawn ``process``, feed it ``stdin`` and run it to its end."""
    await begin(process)
    try:
        process.send(stdin)
        process.close_stdin()
        await process.wait()
    finally:
        result = await process.finish()
    return result


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end from sync code, also when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1, thread_name_prefix="gem-sandbox-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


def execute(launch: Launch, stdin: bytes, limits: Limits, backend: str) -> SandboxResult:
    """Sync :func:`aexecute`."""
    return run_sync(aexecute(launch, stdin, limits, backend))


def _sigkill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            # the command name (field 2) may hold spaces: split after its closing paren
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields else None


def _alive(pid: int, start: str | None) -> bool:
    """Still running (not exited, not a zombie, not a new process reusing the pid)?"""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z" and fields[19] == start


def kill_uid(uid: int) -> None:
    """SIGKILL every live process owned by ``uid`` (repeat: they may be forking)."""
    for _ in range(50):
        found = False
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if entry.stat().st_uid != uid:
                    continue
                fields = _stat(int(entry.name))
                if fields is None or fields[0] == "Z":
                    continue  # zombies are dead already (the leader waits to be reaped by us)
                os.kill(int(entry.name), signal.SIGKILL)
                found = True
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
        if not found:
            return
        time.sleep(0.01)


def _classify(
    returncode: int | None, stopped: str | None, out: _Stream, err: _Stream, duration: float, launch: Launch,
    limits: Limits, backend: str, oom: bool = False,
) -> SandboxResult:  # fmt: skip
    code: int | None = returncode
    limit: str | None = None
    if code is not None and launch.signal_as_128 and 128 < code <= 128 + 64:
        code = -(code - 128)
    if stopped == "timeout":
        status, code = Status.TIMEOUT, None
    elif stopped == "output":
        status, code, limit = Status.LIMIT, None, "output"
    elif code == 0:
        status = Status.OK
    elif oom:
        status, limit = Status.LIMIT, "memory"  # the run's cgroup went over run_memory
    elif code is not None and code < 0:
        sig = -code
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and duration >= (limits.cpu_time or 0)):
            status, limit = Status.LIMIT, "cpu"
            if (limits.cpu_time or 0) >= limits.timeout:
                # RLIMIT_CPU is the timeout's backstop here (by default the timeout in CPU seconds): a busy loop
                # reaches it as it reaches the wall clock, and which stops it first is a race, so it reads as one
                status, code, limit = Status.TIMEOUT, None, None
        elif sig == signal.SIGXFSZ:
            status, limit = Status.LIMIT, "file_size"
        else:
            status = Status.KILLED
    else:
        status = Status.ERROR
        last = err.text().rstrip().rsplit("\n", 1)[-1]
        exception = last.split(":", 1)[0]
        # MemoryError, numpy's _ArrayMemoryError, ...; or a C program's ENOMEM
        if exception.endswith("MemoryError") or "Cannot allocate memory" in last:
            status, limit = Status.LIMIT, "memory"
        elif "File too large" in last:
            status, limit = Status.LIMIT, "file_size"
    return SandboxResult(
        status=status, exit_code=code, stdout=out.text(), stderr=err.text(), duration=duration, backend=backend,
        stdout_truncated=out.truncated, stderr_truncated=err.truncated, limit=limit,
    )  # fmt: skip
