"""A warm sandbox's zygote: started once inside the sandbox, it forks one run at a time.

Run as ``python -s -c SOURCE FD PRELOAD`` inside the same isolation a cold run gets,
with the trusted parent on the other end of FD (a ``SOCK_SEQPACKET`` unix socket) and
PRELOAD the allowed packages to import (comma-separated). Standard library only. The
zygote itself never runs untrusted code: it has Python started and common modules
imported, and for each run it writes the run's files into the empty
working dir, forks, sends the parent a pidfd of the child, and waits. The child takes
fresh stdin/stdout/stderr, its own rlimits and a fresh ``__main__``, and runs
``main.py`` as ``python -s main.py ARGS`` would. When the child has exited, the zygote
kills every other process left in its pid namespace, wipes the working dir, and only
then says it is ready again; anything it cannot put back makes it exit instead, and the
parent starts a fresh one.

A run shares the zygote's uid, so it can reach the zygote with what a uid may do to its own
processes: signals (a fresh zygote, see warm.py), and lowering the zygote's rlimits, nice
value, scheduling policy or CPU affinity with prlimit/setpriority/sched_setaffinity, which
every later run would inherit. So the zygote records that state when it starts, checks it
before every "ready" and exits when a run changed it, and each run sets all of it for
itself (every rlimit, not only the plan's). The zygote is not dumpable (no ptrace, no
/proc/PID/mem). The kernel's keyrings outlive processes, so the zygote runs under the
sandbox's seccomp filter (seccomp.py, installed by the backend) that refuses add_key,
request_key and keyctl, and so does every run it forks. The wipe of the work dir is
bounded by entries, depth and time: a run that leaves more costs a fresh zygote.

Messages (JSON, one per packet): out ``{"ready": true}``; in ``run`` with four fds (the
plan as a memfd, stdin, stdout, stderr); out ``{"pid": N}`` with a pidfd; out
``{"exit": CODE}`` (a signal N as 128 + N, as bwrap reports it) and ``{"ready": true}``.
"""

import base64
import ctypes
import gc
import json
import os
import resource
import signal
import socket
import sys
import time

# what runs commonly import, so that a run does not pay for it (never a run's own code)
for _name in ("json", "re", "math", "collections", "itertools", "functools", "typing", "random", "string",
              "heapq", "bisect", "copy", "dataclasses", "fractions", "decimal", "statistics", "traceback",
              "types", "operator", "io", "ast", "textwrap", "datetime", "array", "struct", "base64"):  # fmt: skip
    try:
        __import__(_name)
    except ImportError:
        pass
for _name in sys.argv[2].split(",") if len(sys.argv) > 2 else ():
    if _name:
        try:
            __import__(_name)
        except Exception:  # an allowed package that fails to import fails in the run too
            pass

gc.freeze()  # what is imported stays shared with the runs' forks, untouched by their collections

PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
#: ioprio_get's number per machine, and its "this process" (IOPRIO_WHO_PROCESS, 0)
_SYS_IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(os.uname().machine)
WORKDIR = "/tmp"
#: the most entries one wipe removes, how deep it goes, and for how long: a run that leaves more
#: (19,000 nested directories made one wipe take 5 s) costs a fresh zygote
WIPE_BUDGET = 20000
WIPE_DEPTH = 64
WIPE_SECONDS = 0.5

_libc = ctypes.CDLL(None, use_errno=True)
_CTRL = socket.socket(fileno=int(sys.argv[1]))
_SELF = os.getpid()
_HANDLERS = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)}
#: every rlimit of this platform (by number: RLIMIT_OFILE and RLIMIT_NOFILE are one)
_RLIMITS = sorted({getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_")})


def _inherited():
    """What a forked run inherits that a run can change in its zygote: every rlimit, the nice value, the
    scheduling policy, the CPU affinity and the I/O priority (ioprio_set works on any process of the uid)."""
    ioprio = _libc.syscall(_SYS_IOPRIO_GET, 1, 0) if _SYS_IOPRIO_GET is not None else None
    return ({r: resource.getrlimit(r) for r in _RLIMITS}, os.getpriority(os.PRIO_PROCESS, 0),
            os.sched_getscheduler(0), frozenset(os.sched_getaffinity(0)), ioprio)


def _keep_set():
    """Paths under the work dir at start (parents of read-only binds): never wiped."""
    kept = set()
    for dirpath, dirs, files in os.walk(WORKDIR):
        kept.update(os.path.join(dirpath, d) for d in dirs)
        kept.update(os.path.join(dirpath, f) for f in files)
    return kept


_KEEP = _keep_set()
#: compiled scripts the parent marked as its own (never a run's): source -> code
_COMPILED = {}
_COMPILED_MAX = 16


def _send(message, fds=()):
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(_CTRL, [data], list(fds))
    else:
        _CTRL.send(data)


def _ancestors():
    pids, pid = set(), os.getppid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_others():
    """SIGKILL every process of the namespace but this one and its ancestors, and reap
    them; True once none is left."""
    spare = _ancestors() | {_SELF}
    for _ in range(500):
        _reap()
        left = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in spare:
                continue
            try:
                os.kill(int(name), signal.SIGKILL)
                left = True  # a zombie too: it is ours (we are the subreaper) to reap next round
            except OSError:
                continue
        if not left:
            return True
        os.sched_yield()
    return False


def _wipe():
    """Empty the work dir (hidden files, read-only dirs too); False when it cannot, or when the run left
    more than :data:`WIPE_BUDGET` entries, deeper than :data:`WIPE_DEPTH`, or more than
    :data:`WIPE_SECONDS` of work."""
    stack, budget = [(WORKDIR, 0)], WIPE_BUDGET
    deadline = time.monotonic() + WIPE_SECONDS
    dirs = []
    while stack:
        path, depth = stack.pop()
        if depth > WIPE_DEPTH or time.monotonic() > deadline:
            return False
        try:
            if path not in _KEEP:
                os.chmod(path, 0o1777 if path == WORKDIR else 0o700)
        except OSError:
            pass  # the work dir's tmpfs root may be root's
        try:
            entries = list(os.scandir(path))
        except OSError:
            return False
        for entry in entries:
            budget -= 1
            if budget < 0:
                return False
            if entry.is_dir(follow_symlinks=False) and not os.path.ismount(entry.path):
                stack.append((entry.path, depth + 1))
                dirs.append(entry.path)
            elif entry.path not in _KEEP and not os.path.ismount(entry.path):
                try:
                    os.unlink(entry.path)
                except OSError:
                    return False
    for path in reversed(dirs):
        if path not in _KEEP:
            if time.monotonic() > deadline:
                return False
            try:
                os.rmdir(path)
            except OSError:
                return False
    return True


def _ipc_clean():
    """No System V IPC object may outlive a run (they live on in the IPC namespace)."""
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                if len(f.read().splitlines()) > 1:
                    return False
        except OSError:
            pass
    return True


def _write_files(files):
    for name, data in files.items():
        path = os.path.join(WORKDIR, name)
        os.makedirs(os.path.dirname(path), mode=0o777, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666)
        try:
            view = memoryview(base64.b64decode(data))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)


def _read_all(fd):
    chunks = []
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _serve():
    """Serve runs until told to stop; returns (in the forked child only) the run's plan."""
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGALRM, signal.SIGPIPE, signal.SIGXCPU, signal.SIGXFSZ, signal.SIGTSTP, signal.SIGTTIN,
                signal.SIGTTOU, signal.SIGVTALRM, signal.SIGPROF):  # fmt: skip
        signal.signal(sig, signal.SIG_IGN)
    _send({"ready": True})
    while True:
        data, fds, _, _ = socket.recv_fds(_CTRL, 1024, 8)
        if data != b"run" or len(fds) != 4:
            os._exit(0)
        plan = json.loads(_read_all(fds[0]))
        os.close(fds[0])
        _write_files(plan["files"])
        if plan.get("trusted_main") and plan["files"].get("main.py") not in _COMPILED:
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.clear()
            source = base64.b64decode(plan["files"]["main.py"])
            _COMPILED[plan["files"]["main.py"]] = compile(source, os.path.join(WORKDIR, plan["argv"][0]), "exec",
                                                          dont_inherit=True)  # fmt: skip
        pid = os.fork()
        if pid == 0:
            return plan, fds[1:]
        for fd in fds[1:]:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        _send({"pid": pid}, [pidfd])
        os.close(pidfd)
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
        code = 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _send({"exit": code})
        if not (_kill_others() and _wipe() and _ipc_clean() and _inherited() == _START):
            os._exit(0)  # what a run left, or changed in this zygote, is not put back: a fresh zygote
        _send({"ready": True})


def _enter(plan, fds):
    """In the run's child: take its fds and limits, then run."""
    _CTRL.detach()  # closed below with the rest; its object must not close a run's fd later
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.closerange(3, 1 << 16)
    for sig, handler in _HANDLERS.items():
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (OSError, ValueError, TypeError):
            pass
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    os.setsid()
    # all of it, not only what the plan names: the plan's limits, every other one as the zygote started with,
    # its nice value, scheduling policy and CPU affinity
    limits, nice, policy, cpus, _ioprio = _START  # the I/O priority: the zygote's, checked unchanged
    wanted = dict(limits)
    for name, value in plan["rlimits"].items():
        wanted[getattr(resource, name)] = tuple(value)
    for limit, value in wanted.items():
        resource.setrlimit(limit, value)
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    if os.sched_getscheduler(0) != policy:
        os.sched_setscheduler(0, policy, os.sched_param(0))
    os.sched_setaffinity(0, cpus)
    os.chdir(WORKDIR)
    sys.argv = list(plan["argv"])
    sys.path[0] = WORKDIR
    return _COMPILED.get(plan["files"].get("main.py")) if plan.get("trusted_main") else None


def _exit_status(exc):
    """What the interpreter makes of a SystemExit: its status (printing a non-int code)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:
        pass
    return 1


def _finish(status):
    """The parts of interpreter shutdown a program can observe, then exit.

    Non-daemon threads are joined and atexit handlers run, as at a normal exit; tearing
    down every module (most of an exit's time in a forked interpreter) is skipped."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            status = 120  # the interpreter's status when the final flush fails
    os._exit(status)


if __name__ == "__main__":
    _START = _inherited()
    _plan, _fds = _serve()
    _code = _enter(_plan, _fds)
    _COMPILED.clear()
    del _plan, _fds
    import builtins
    import importlib.machinery
    import types

    _main = types.ModuleType("__main__")
    _main.__file__ = os.path.join(WORKDIR, sys.argv[0])
    _main.__cached__ = None
    _main.__loader__ = importlib.machinery.SourceFileLoader("__main__", _main.__file__)
    _main.__builtins__ = builtins
    sys.modules["__main__"] = _main
    try:
        if _code is None:
            with open(_main.__file__, "rb") as _f:
                _code = compile(_f.read(), _main.__file__, "exec", dont_inherit=True)
            del _f
        exec(_code, _main.__dict__)
        _status = 0
    except SystemExit as _exc:
        _status = _exit_status(_exc)
    except BaseException as _exc:
        # the zygote's own frame is not the program's: the traceback starts in main.py
        _exc = _exc.with_traceback(_exc.__traceback__.tb_next)
        sys.excepthook(type(_exc), _exc, _exc.__traceback__)
        if isinstance(_exc, KeyboardInterrupt):  # as the interpreter does: die of SIGINT
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        _status = 1
    _finish(_status)
