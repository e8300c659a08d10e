"""The sandbox's ordinary behaviour: results, statuses, inputs, files, interpreters."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from gem_tools.sandbox import Limits, Sandbox, SandboxUnavailableError, Status, UnknownPackageError, resolve_backend


def test_ok_run_reports_everything(box):
    r = box.run_python("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert (r.status, r.exit_code, r.stdout, r.stderr) == (Status.OK, 0, "out\n", "err\n")
    assert r.backend == box.backend_name and r.duration > 0 and not r.truncated


def test_exit_codes_and_signals(box):
    assert box.run_python("raise SystemExit(7)").exit_code == 7
    error = box.run_python("1/0")
    assert error.status is Status.ERROR and error.exit_code == 1 and "ZeroDivisionError" in error.stderr
    killed = box.run_python("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    assert killed.status is Status.KILLED and killed.exit_code == -9
    segv = box.run_command(["sh", "-c", "kill -SEGV $$"])
    assert segv.status is Status.KILLED and segv.exit_code == -11


def test_stdin_files_and_args(box):
    files = {"data/input.txt": "3 4\n", "helper.py": "def mul(a, b):\n    return a * b\n", "raw.bin": b"\x00\x01"}
    code = """
import sys
from helper import mul
a, b = map(int, open("data/input.txt").read().split())
c, d = map(int, sys.stdin.read().split())
print(mul(a, b) + mul(c, d), len(open("raw.bin", "rb").read()), sys.argv[1:])
"""
    r = box.run_python(code, stdin="5 6", files=files, args=["x", "y"])
    assert r.ok, r.stderr
    assert r.stdout == "42 2 ['x', 'y']\n"
    with pytest.raises(ValueError):
        box.run_python("pass", files={"../escape.py": "x"})
    with pytest.raises(ValueError):
        box.run_python("pass", files={"/etc/passwd": "x"})


def test_large_stdin_is_fed_without_deadlock(box):
    data = "x" * (1 << 20)
    r = box.run_python("import sys\nprint(len(sys.stdin.read()))", stdin=data)
    assert r.ok and r.stdout == f"{len(data)}\n"


def test_commands_run_with_a_clean_environment(box, monkeypatch):
    monkeypatch.setenv("GEM_TEST_LEAK", "1")
    r = box.run_command(["sh", "-c", "echo $HOME $TMPDIR $GEM_TEST_LEAK; pwd; id -u"])
    home, tmpdir, *rest = r.stdout.split("\n")[0].split()
    assert (home, tmpdir, rest) == ("/tmp", "/tmp", [])
    assert r.stdout.split("\n")[1] == "/tmp" and r.stdout.split("\n")[2] != "0"
    extra = Sandbox(backend=box.backend_name, env={"MY_VAR": "hello"}).run_command(["sh", "-c", "echo $MY_VAR"])
    assert extra.stdout == "hello\n"


def test_allowed_packages_import_and_others_do_not(box):
    code = "import numpy, sympy\nprint(int(numpy.arange(5).sum()), sympy.factorint(360))"
    allowed = Sandbox(backend=box.backend_name, limits=box.limits, packages=("numpy", "sympy", "mpmath"))
    r = allowed.run_python(code)
    assert r.ok, r.stderr
    assert r.stdout == "10 {2: 3, 3: 2, 5: 1}\n"
    # only what is listed: the same interpreter without the allow-list has the stdlib alone
    assert "No module named 'numpy'" in box.run_python(code).stderr
    assert "No module named 'sympy'" in Sandbox(backend=box.backend_name, packages=("numpy",)).run_python(code).stderr


def test_unknown_allowed_package_is_a_clear_error():
    with pytest.raises(UnknownPackageError, match="no_such_package_xyz"):
        Sandbox(packages=("no_such_package_xyz",))


def test_runs_are_independent(box):
    box.run_python("open('left.txt', 'w').write('x')")
    r = box.run_python("import os\nprint(sorted(os.listdir('.')))")
    assert "main.py" in r.stdout and "left.txt" not in r.stdout


def test_async_entry_points(box):
    async def main():
        return await asyncio.gather(box.arun_python("print(1)"), box.arun_command(["echo", "2"]))

    py, cmd = asyncio.run(main())
    assert (py.stdout, cmd.stdout) == ("1\n", "2\n")


def test_limits_validate_and_follow_timeout():
    assert Limits(timeout=2.5).cpu_time == 3
    assert Limits().with_(timeout=7).cpu_time == 7
    assert Limits().with_(timeout=7, cpu_time=2).cpu_time == 2
    with pytest.raises(ValueError):
        Limits(memory=0)
    with pytest.raises(ValueError):
        Limits(output=100, output_kill=10)


def test_backend_selection_errors():
    with pytest.raises(ValueError, match="unknown sandbox backend"):
        resolve_backend("docker")
    assert resolve_backend("auto").name == "bwrap"
    assert issubclass(SandboxUnavailableError, RuntimeError)


def test_run_command_needs_argv(box):
    with pytest.raises(ValueError):
        box.run_command([])


def test_runs_use_unprivileged_uids(box):
    uids = {box.run_command(["id", "-u"]).stdout.strip() for _ in range(3)}
    if os.geteuid() == 0:
        # root callers: a fresh uid per run, so runs cannot count against or signal each other
        assert len(uids) == 3 and "0" not in uids
    else:
        # others keep their host uid, seen as nobody inside the user namespace
        assert uids == {"65534"}


def test_gem_sandbox_command(capsys):
    from gem.plugins import catalog

    assert catalog().commands.get("sandbox").factory([]) == 0
    out = capsys.readouterr().out
    assert "bwrap    ok" in out and "default: bwrap" in out
    assert "search-server" in catalog().commands.names()


@pytest.mark.parametrize("backend", ["bwrap", "unshare"])
def test_a_venv_under_tmp_runs_as_its_base_with_only_allowed_packages(tmp_path, backend):
    # a checkout (and its venv) under /tmp: an allowed package of it is bound inside the
    # sandbox's own /tmp-shadowed view; the rest of its site-packages stays out of sight
    import glob
    import subprocess
    import sys

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = glob.glob(str(venv / "lib" / "python*" / "site-packages"))
    Path(site, "answers_pkg.py").write_text("ANSWER = 42\n")
    Path(site, "allowed_pkg.py").write_text("VALUE = 7\n")
    box = Sandbox(backend=backend, python=str(venv / "bin" / "python"), packages=("allowed_pkg",))
    r = box.run_python("import sys, allowed_pkg; print(allowed_pkg.VALUE, sys.prefix != " + repr(str(venv)) + ")\n"
                       "import answers_pkg")  # fmt: skip
    assert r.stdout == "7 True\n" and "No module named 'answers_pkg'" in r.stderr, r
