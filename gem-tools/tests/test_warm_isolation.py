"""Warm runs: nothing one run does reaches the next run forked from the same zygote."""

from __future__ import annotations

import asyncio
import secrets
import textwrap
import warnings
from collections.abc import Iterator

import pytest

from gem_tools.sandbox import Limits, Sandbox, Status


@pytest.fixture(params=("bwrap", "unshare"))
def warm(request) -> Iterator[Sandbox]:
    """A warm sandbox with a pool of its own (a unique environment is a unique pool)."""
    box = Sandbox(backend=request.param, limits=Limits(timeout=5, memory=512 << 20),
                  env={"GEM_TEST_POOL": secrets.token_hex(6)})  # fmt: skip
    assert box.path()[0] == "warm", box.path()
    yield box
    box._pool().close()


def run(box: Sandbox, code: str, **kwargs) -> str:
    result = box.run_python(textwrap.dedent(code), **kwargs)
    assert result.ok, (result.status, result.stderr)
    return result.stdout.strip()


def zygote_pid(box: Sandbox) -> int:
    (zygote,) = box._pool().idle
    return zygote.popen.pid


def test_runs_fork_from_one_kept_zygote(warm):
    run(warm, "pass")
    first = zygote_pid(warm)
    run(warm, "pass")
    assert zygote_pid(warm) == first


def test_patched_modules_do_not_survive(warm):
    run(warm, """
        import builtins, json, sys
        json.dumps = lambda *a, **k: "patched"
        sys.modules["planted"] = sys
        sys.path.insert(0, "/planted")
        sys.setrecursionlimit(50)
        builtins.print = lambda *a, **k: None
    """)  # fmt: skip
    out = run(warm, """
        import json, sys
        print(json.dumps([1]), "planted" in sys.modules, "/planted" in sys.path, sys.getrecursionlimit())
    """)  # fmt: skip
    assert out == "[1] False False 1000"


def test_files_do_not_survive(warm):
    run(warm, """
        import os
        open("json.py", "w").write("dumps = lambda *a, **k: 'shadowed'")
        open("/tmp/.hidden", "w").write("x")
        os.makedirs("/tmp/d/e/f")
        open("/tmp/d/e/f/g", "w").write("x")
        os.chmod("/tmp/d/e", 0)
        os.symlink("/etc/passwd", "/tmp/link")
        for name in ("big1", "big2", "big3"):
            open(name, "wb").write(b"x" * (12 << 20))
    """)  # fmt: skip
    out = run(warm, """
        import json, os
        for name in ("big1", "big2", "big3"):   # the 64 MiB tmpfs was emptied: room again
            open(name, "wb").write(b"x" * (12 << 20))
        print(sorted(os.listdir("/tmp")), json.dumps(1))
    """)  # fmt: skip
    assert out == "['big1', 'big2', 'big3', 'main.py'] 1"


def test_memory_and_environment_do_not_survive(warm):
    run(warm, """
        import os
        hog = bytearray(300 << 20)
        os.environ["PLANTED"] = "1"
        os.putenv("PLANTED_TOO", "1")
        os.chdir("/")
        os.umask(0)
    """)  # fmt: skip
    out = run(warm, """
        import os
        hog = bytearray(300 << 20)   # the first run's 300 MiB is gone: this fits under 512 MiB
        print("PLANTED" in os.environ, "PLANTED_TOO" in os.environ, os.getcwd(), oct(os.umask(0o22)))
    """)  # fmt: skip
    assert out == "False False /tmp 0o22"


def test_children_left_running_are_killed(warm):
    run(warm, """
        import os, subprocess, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(1)
                open("/tmp/late", "w").write("x")
                os._exit(0)
            os._exit(0)
        subprocess.Popen(["sleep", "1000"], start_new_session=True)
    """)  # fmt: skip
    out = run(warm, """
        import os, time
        time.sleep(1.5)
        mine = {os.getpid(), os.getppid(), 1}
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in mine]
        print(os.path.exists("/tmp/late"), others)
    """)  # fmt: skip
    assert out == "False []"


@pytest.mark.parametrize("sig", ["SIGSTOP", "SIGKILL", "SIGTERM", "SIGINT", "SIGSEGV"])
def test_signals_to_the_zygote_cost_only_a_fresh_zygote(warm, sig):
    run(warm, "pass")
    before = zygote_pid(warm)
    result = warm.run_python(f"import os, signal; os.kill(os.getppid(), signal.{sig}); print('sent')")
    assert result.status in (Status.OK, Status.KILLED)
    assert run(warm, "import os; print(sorted(os.listdir('/tmp')))") == "['main.py']"
    assert run(warm, "print(6 * 7)") == "42"
    if sig in ("SIGSTOP", "SIGKILL"):
        assert zygote_pid(warm) != before


def test_zygote_memory_and_ptrace_are_out_of_reach(warm):
    out = run(warm, """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        zygote = os.getppid()
        attach = libc.ptrace(16, zygote, None, None)          # PTRACE_ATTACH
        seize = libc.ptrace(0x4206, zygote, None, None)       # PTRACE_SEIZE
        denied = []
        for path in (f"/proc/{zygote}/mem", f"/proc/{zygote}/environ", f"/proc/{zygote}/maps"):
            try:
                open(path, "rb").read(1)
            except OSError:
                denied.append(os.path.basename(path))
        try:
            os.listdir(f"/proc/{zygote}/fd")
        except OSError:
            denied.append("fd")
        print(attach, seize, denied)
    """)  # fmt: skip
    assert out == "-1 -1 ['mem', 'environ', 'maps', 'fd']"


def test_only_fresh_standard_fds_are_inherited(warm):
    out = run(warm, """
        import os
        print(sorted(int(fd) for fd in os.listdir("/proc/self/fd"))[:3], len(os.listdir("/proc/self/fd")))
        for fd in range(3, 1024):
            try:
                os.write(fd, b"planted")
                print("wrote", fd)
            except OSError:
                pass
    """, stdin="in")  # fmt: skip
    assert out == "[0, 1, 2] 4"  # 0-2 and the listing's own fd
    assert run(warm, "import sys; print(repr(sys.stdin.read()))", stdin="second") == "'second'"


def test_system_v_ipc_objects_do_not_survive(warm):
    run(warm, """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.shmget(0x4745, 4096, 0o1666) >= 0       # IPC_CREAT | 0666
        assert libc.semget(0x4746, 1, 0o1666) >= 0
    """)  # fmt: skip
    assert run(warm, "print(len(open('/proc/sysvipc/shm').read().splitlines()))") == "1"  # header only
    assert run(warm, "print(len(open('/proc/sysvipc/sem').read().splitlines()))") == "1"


def test_keyrings_do_not_survive(warm):
    # x86_64 syscall numbers: add_key 248, keyctl 250 (KEYCTL_SEARCH 10, KEYCTL_GET_PERSISTENT 22); a run can
    # store no key at all (seccomp: EPERM), so none can reach the next run
    out = run(warm, """
        import ctypes, errno
        libc = ctypes.CDLL(None, use_errno=True)
        added = [libc.syscall(248, b"user", b"planted%d" % -ring, b"x", 1, ring) for ring in (-3, -4, -5)]
        print(added, ctypes.get_errno() == errno.EPERM, libc.syscall(250, 22, -1, -4))
    """)  # fmt: skip
    assert out == "[-1, -1, -1] True -1"
    out = run(warm, """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        print([libc.syscall(250, 10, ring, b"user", b"planted%d" % -ring, 0) for ring in (-3, -4, -5)])
    """)  # fmt: skip
    assert out == "[-1, -1, -1]"


def test_trusted_code_is_compiled_once_and_runs_fresh(warm):
    script = "import sys\nseen = getattr(sys, 'seen', 0)\nsys.seen = seen + 1\nprint(seen, input())"

    async def once(text):
        async with warm.open_python(script, trusted_code=True) as process:
            process.send(text.encode() + b"\n")
            return await process.readline()

    assert [asyncio.run(once(t)) for t in ("a", "b")] == [b"0 a\n", b"0 b\n"]


def test_concurrent_runs_never_share_a_tmp(warm):
    async def both():
        writer = warm.arun_python("import time; open('/tmp/mine', 'w').write('x'); time.sleep(1)")
        await asyncio.sleep(0.3)
        reader = warm.arun_python("import os, time; time.sleep(0.2); print(os.listdir('/tmp'))")
        return await asyncio.gather(writer, reader)

    written, read = asyncio.run(both())
    assert written.ok and read.stdout.strip() == "['main.py']"


def test_warm_run_limits_and_statuses_match_cold(warm):
    cold = Sandbox(backend=warm.backend_name, limits=warm.limits, warm=False)
    assert cold.path() == ("cold", "Sandbox(warm=False)")
    cases = {
        "while True: pass": (Status.TIMEOUT, None),
        "import sys; sys.exit(3)": (Status.ERROR, None),
        "raise SystemExit('bye')": (Status.ERROR, None),
        "import os; os.kill(os.getpid(), 9)": (Status.KILLED, None),
        "x = bytearray(2 << 30)": (Status.LIMIT, "memory"),
        "open('f', 'wb').write(b'x' * (32 << 20))": (Status.LIMIT, "file_size"),
        "print('x' * (9 << 20))": (Status.LIMIT, "output"),
    }
    limits = warm.limits.with_(timeout=1.5)
    for code, (status, limit) in cases.items():
        got = [box.run_python(code, limits=limits) for box in (warm, cold)]
        assert [(r.status, r.limit if limit else None) for r in got] == [(status, limit)] * 2, (code, got)
        assert got[0].exit_code == got[1].exit_code, code
        assert got[0].stderr == got[1].stderr, code
    assert run(warm, "print(6 * 7)") == "42"


def test_rlimit_backend_and_switch_choose_the_cold_path(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the rlimit backend's "not isolation" warning
        path, why = Sandbox(backend="rlimit").path()
    assert path == "cold" and "rlimit" in why
    monkeypatch.setenv("GEM_SANDBOX_WARM", "0")
    assert Sandbox().path() == ("cold", "disabled by GEM_SANDBOX_WARM=0")


def test_gem_sandbox_shows_the_path(capsys, monkeypatch):
    from gem_tools.plugin import cmd_sandbox

    assert cmd_sandbox([]) == 0
    assert "python runs: warm (" in capsys.readouterr().out
    monkeypatch.setenv("GEM_SANDBOX_WARM", "0")
    assert cmd_sandbox([]) == 0
    assert "python runs: cold (disabled by GEM_SANDBOX_WARM=0)" in capsys.readouterr().out


def test_a_zygote_that_cannot_start_falls_back_to_cold(monkeypatch):
    from gem_tools.sandbox import warm as warm_module

    monkeypatch.setattr(warm_module, "_SOURCE", "import sys; sys.exit('no zygote here')")
    box = Sandbox(env={"GEM_TEST_POOL": secrets.token_hex(6)})
    assert box.run_python("print(6 * 7)").stdout == "42\n"
    assert box.path() == ("cold", "the zygote did not start: no zygote here")
