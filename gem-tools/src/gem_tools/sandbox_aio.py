"""Sandboxed runs under asyncio: the sandbox's own command line, pumped by the event loop.

:meth:`Sandbox.prepare <gem_tools.sandbox.Sandbox.prepare>` builds the run exactly as
``run_command`` does, and :func:`gem_tools.sandbox.runner.spawn` /
:func:`~gem_tools.sandbox.runner.finish` start it and clean up after it, so isolation,
limits and classification are the sandbox's. Only the waiting differs: instead of a
thread blocking in ``select``, the pipes and a pidfd (readable once the program exits,
without reaping it, so its process group stays ours until it is killed) are watched by
the running event loop. Many runs in flight cost no threads.

>>> from gem_tools.sandbox import Sandbox
>>> result = asyncio.run(arun_python(Sandbox(), "print(6 * 7)"))  # doctest: +SKIP
>>> result.stdout                                                   # doctest: +SKIP
'42\\n'
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Mapping, Sequence

from gem_tools.sandbox import Limits, Sandbox, SandboxResult
from gem_tools.sandbox.backends import Launch
from gem_tools.sandbox.runner import _CHUNK, _GRACE, _Stream, finish, spawn


async def arun_command(
    box: Sandbox,
    argv: Sequence[str],
    stdin: str | bytes = "",
    files: Mapping[str, str | bytes] | None = None,
    limits: Limits | None = None,
) -> SandboxResult:
    """:meth:`Sandbox.run_command` awaited on the event loop (no thread per run)."""
    launch, data, lim = box.prepare(argv, stdin, files, limits)
    return await aexecute(launch, data, lim, box.backend.name)


async def arun_python(
    box: Sandbox,
    code: str,
    stdin: str | bytes = "",
    files: Mapping[str, str | bytes] | None = None,
    limits: Limits | None = None,
    args: Sequence[str] = (),
) -> SandboxResult:
    """:meth:`Sandbox.run_python` awaited on the event loop."""
    all_files = {**(files or {}), "main.py": code}
    return await arun_command(box, [box.interpreter.executable, "-s", "main.py", *args], stdin, all_files, limits)


async def aexecute(launch: Launch, stdin: bytes, limits: Limits, backend: str) -> SandboxResult:
    """:func:`gem_tools.sandbox.runner.execute` for asyncio: same start, same clean-up."""
    proc, start = spawn(launch)
    try:
        out, err, stopped = await _apump(proc, stdin, limits, start)
    except BaseException:  # cancelled or interrupted: the run is still killed and reaped
        finish(proc, launch, _Stream(0), _Stream(0), None, start, limits, backend)
        raise
    return finish(proc, launch, out, err, stopped, start, limits, backend)


async def _apump(
    proc: subprocess.Popen, stdin: bytes, limits: Limits, start: float
) -> tuple[_Stream, _Stream, str | None]:
    """Move bytes until both outputs close, the deadline passes or output overflows
    (the runner's ``_pump``, driven by the event loop)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    loop = asyncio.get_running_loop()
    out, err = _Stream(limits.output), _Stream(limits.output)
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    outputs_done: asyncio.Future[str | None] = loop.create_future()  # None, or "output" on overflow
    exited: asyncio.Future[float] = loop.create_future()
    pending = memoryview(stdin)
    in_fd = proc.stdin.fileno()

    def settle(future: asyncio.Future, value: object) -> None:
        if not future.done():
            future.set_result(value)

    def read(fd: int) -> None:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            loop.remove_reader(fd)
            del streams[fd]
            if not streams:
                settle(outputs_done, None)
            return
        streams[fd].feed(chunk)
        if out.seen + err.seen > limits.output_kill:
            settle(outputs_done, "output")

    def write() -> None:
        nonlocal pending
        try:
            pending = pending[os.write(in_fd, pending[:_CHUNK]) :]
        except BlockingIOError:
            return
        except OSError:  # the program closed its stdin
            pending = pending[:0]
        if not pending:
            loop.remove_writer(in_fd)
            proc.stdin.close()  # type: ignore[union-attr]

    pidfd = os.pidfd_open(proc.pid)
    watched = list(streams)
    try:
        for fd in watched:
            os.set_blocking(fd, False)
            loop.add_reader(fd, read, fd)
        loop.add_reader(pidfd, settle, exited, 0.0)
        if pending:
            os.set_blocking(in_fd, False)
            loop.add_writer(in_fd, write)
        else:
            proc.stdin.close()
        deadline = start + limits.timeout
        await asyncio.wait([outputs_done, exited], timeout=max(0.0, deadline - time.monotonic()),
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        if exited.done() and not outputs_done.done():
            # the program exited; something outside a pid namespace may still hold the
            # pipes, so give its output a moment and then stop waiting
            grace = min(deadline - time.monotonic(), _GRACE)
            await asyncio.wait([outputs_done], timeout=max(0.0, grace))
        elif outputs_done.done() and outputs_done.result() is None and not exited.done():
            # outputs closed: wait for the exit (without reaping, see the runner's _kill)
            await asyncio.wait([exited], timeout=max(0.0, deadline - time.monotonic()))
        if outputs_done.done() and outputs_done.result() == "output":
            return out, err, "output"
        if time.monotonic() >= deadline and not (exited.done() and outputs_done.done()):
            return out, err, "timeout"
        return out, err, None if exited.done() else "timeout"
    finally:
        for fd in [*watched, pidfd]:
            loop.remove_reader(fd)
        if not proc.stdin.closed:
            loop.remove_writer(in_fd)
        os.close(pidfd)
