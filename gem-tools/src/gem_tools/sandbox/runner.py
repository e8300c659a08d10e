"""Run a :class:`Launch`: feed stdin, keep capped stdout/stderr, enforce the wall clock,
kill what is left, and classify how the run ended."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time

from gem_tools.sandbox.backends import Launch
from gem_tools.sandbox.limits import Limits
from gem_tools.sandbox.result import SandboxResult, Status

_CHUNK = 1 << 16
# after the program exits, how long stray writers may keep the pipes open
_GRACE = 0.2


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


def execute(launch: Launch, stdin: bytes, limits: Limits, backend: str) -> SandboxResult:
    """Run ``launch`` to completion under ``limits``; always reaps and cleans up."""
    proc, start = spawn(launch)
    try:
        out, err, stopped = _pump(proc, stdin, limits, start)
    except BaseException:
        finish(proc, launch, _Stream(0), _Stream(0), None, start, limits, backend)
        raise
    return finish(proc, launch, out, err, stopped, start, limits, backend)


def spawn(launch: Launch) -> tuple[subprocess.Popen, float]:
    """Start ``launch``; the process and its start time. Half of :func:`execute`, shared
    with the asyncio runner (``gem_tools.sandbox_async``), which pumps the pipes itself."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            launch.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=launch.env,
            cwd=launch.cwd,
            pass_fds=launch.pass_fds,
            user=launch.user,
            group=launch.group,
            extra_groups=[] if launch.user is not None else None,
            start_new_session=True,
        )
    except BaseException:
        launch.close()
        raise
    # the child holds its own copies now
    fds, launch.pass_fds = launch.pass_fds, ()
    for fd in fds:
        os.close(fd)
    return proc, start


def finish(
    proc: subprocess.Popen,
    launch: Launch,
    out: _Stream,
    err: _Stream,
    stopped: str | None,
    start: float,
    limits: Limits,
    backend: str,
) -> SandboxResult:
    """Kill what is left of a run (its leader not yet reaped), reap it, close its pipes
    and classify it. The other half of :func:`execute`."""
    try:
        _kill(proc, launch)
        proc.wait()
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        launch.close()
    duration = time.monotonic() - start
    return _classify(proc.returncode, stopped, out, err, duration, launch, limits, backend)


def _pump(proc: subprocess.Popen, stdin: bytes, limits: Limits, start: float) -> tuple[_Stream, _Stream, str | None]:
    """Move bytes until both outputs close, the deadline passes or output overflows."""
    out, err = _Stream(limits.output), _Stream(limits.output)
    sel = selectors.DefaultSelector()
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in streams:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin)
    in_fd = proc.stdin.fileno()
    if pending:
        os.set_blocking(in_fd, False)
        sel.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    deadline = start + limits.timeout
    exited_at: float | None = None
    stopped: str | None = None
    try:
        while streams:
            now = time.monotonic()
            if now >= deadline:
                stopped = "timeout"
                break
            if exited_at is None and _exited(proc.pid):
                exited_at = now
            if exited_at is not None and now - exited_at > _GRACE:
                break  # something outside a pid namespace still holds the pipes
            for key, _ in sel.select(timeout=min(0.05, deadline - now)):
                fd = key.fd
                if fd == in_fd:
                    try:
                        n = os.write(fd, pending[:_CHUNK])
                        pending = pending[n:]
                    except (BrokenPipeError, BlockingIOError) as exc:
                        if isinstance(exc, BlockingIOError):
                            continue
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                try:
                    chunk = os.read(fd, _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(fd)
                    del streams[fd]
                    continue
                streams[fd].feed(chunk)
                if out.seen + err.seen > limits.output_kill:
                    stopped = "output"
                    return out, err, stopped
    finally:
        sel.close()
    if stopped is None:
        # outputs closed; wait for the exit without reaping (see _kill)
        pause = 0.001
        while not _exited(proc.pid):
            if time.monotonic() >= deadline:
                stopped = "timeout"
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
    return out, err, stopped


def _exited(pid: int) -> bool:
    """Has ``pid`` exited? Does not reap it, so its pid (= process group) stays ours."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill(proc: subprocess.Popen, launch: Launch) -> None:
    """Kill everything the run started, and wait until it is gone.

    Called before the leader is reaped, so its pid (= process group) cannot belong to
    anyone else. The namespace backends' pid 1 is a child of the leader in a session of
    its own: killing it makes the kernel kill the rest of its namespace, and it only
    disappears once they are all dead, so waiting for it is waiting for them.
    """
    children = [(pid, _start_time(pid)) for pid in _children(proc.pid)]
    for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), *(
        (lambda pid=pid: os.kill(pid, signal.SIGKILL)) for pid, _ in children
    )):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass
    if launch.host_uid is not None:
        kill_uid(launch.host_uid)
    deadline = time.monotonic() + 5
    while any(_alive(pid, start) for pid, start in children) and time.monotonic() < deadline:
        time.sleep(0.005)


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
    returncode: int | None,
    stopped: str | None,
    out: _Stream,
    err: _Stream,
    duration: float,
    launch: Launch,
    limits: Limits,
    backend: str,
) -> SandboxResult:
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
    elif code is not None and code < 0:
        sig = -code
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and duration >= (limits.cpu_time or 0)):
            status, limit = Status.LIMIT, "cpu"
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
        status=status,
        exit_code=code,
        stdout=out.text(),
        stderr=err.text(),
        duration=duration,
        backend=backend,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        limit=limit,
    )
