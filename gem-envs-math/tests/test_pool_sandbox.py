"""The grading workers are born in gem-tools' sandbox where one works: forked from a
template kept in it, they have no network, see the system and our packages read-only and
nothing else of the host, write only to a private /tmp, and run as an unprivileged uid,
while grading, CPU deadlines and worker replacement work as outside it. Where no sandbox
can start, the pool says why and grades unsandboxed, unless GEM_MATH_GRADER_SANDBOX=1
asks for it."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import gem_envs_math
from gem_envs_math import workers as worker_module
from gem_envs_math.pool import GradingPool

sandbox = pytest.importorskip("gem_tools.sandbox")
from gem_tools.sandbox.helper import PATH_DIR, helper_launch  # noqa: E402

BACKENDS = [name for name, why in sandbox.available_backends().items() if why is None and name != "rlimit"]
pytestmark = pytest.mark.skipif(not BACKENDS, reason="no isolating sandbox backend works here")


@pytest.fixture(scope="module", params=BACKENDS)
def boxed(request: pytest.FixtureRequest) -> Iterator[GradingPool]:
    backend = request.param
    patch = pytest.MonkeyPatch()
    # the template starts in the pool's scheduler thread: a module-level patch reaches it
    patch.setattr(worker_module, "_helper_launch",
                  lambda args, env: (helper_launch(args, backend=backend, env=env), backend))
    with GradingPool(workers=2, timeout=1.0, sandbox=True) as pool:
        try:
            assert pool.isolation() == (f"{backend} sandbox", "forked from a grading template kept in the sandbox")
        finally:
            patch.undo()  # the template has started in that backend
        yield pool


def _error(outcome) -> str:
    assert outcome.status == "error", outcome
    return outcome.value


def test_a_sandboxed_worker_grades_and_its_deadline_holds(boxed: GradingPool) -> None:
    assert boxed.compare(r"\frac{1}{2}", "0.5").correct
    assert not boxed.compare("3", "4").correct
    before = boxed.restarts
    assert boxed.compare("9^{9^{9^9}}", "1").status == "timeout"  # CPU time read through the host's pid
    assert boxed.restarts == before + 1 and boxed.compare("2", "2").correct


def test_a_sandboxed_worker_has_no_network(boxed: GradingPool) -> None:
    message = _error(boxed.call("socket:create_connection", ("1.1.1.1", 53), 2))
    assert "unreachable" in message.lower() or str(errno.ENETUNREACH) in message


def test_a_sandboxed_worker_sees_none_of_the_host_but_our_packages_read_only(
        boxed: GradingPool, tmp_path: Path) -> None:
    project = Path(gem_envs_math.__file__).resolve().parents[3]
    assert "FileNotFoundError" in _error(boxed.call("os:listdir", str(project)))
    (tmp_path / "secret").write_text("42")
    assert "FileNotFoundError" in _error(boxed.call("os:stat", str(tmp_path / "secret")))
    # of a home dir, only the way to an interpreter living there (pyenv) is visible
    home = os.path.expanduser("~")
    listed = boxed.call("os:listdir", home)
    if listed.status == "ok":
        dirs = sandbox.layout.interpreter().dirs
        assert all(any(d.startswith(os.path.join(home, entry)) for d in dirs) for entry in listed.value)
    # the import path is there, read-only
    assert boxed.call("os:listdir", f"{PATH_DIR}/0").status == "ok"
    assert "Read-only file system" in _error(boxed.call("os:mkdir", f"{PATH_DIR}/0/written-by-a-grader"))
    assert "Read-only file system" in _error(boxed.call("os:mkdir", "/usr/written-by-a-grader"))


def test_a_sandboxed_worker_writes_only_to_its_private_tmp(boxed: GradingPool) -> None:
    name = f"/tmp/gem-grader-probe-{os.getpid()}"
    assert boxed.call("os:mkdir", name).status == "ok"
    assert not os.path.exists(name)


def test_a_sandboxed_worker_runs_as_an_unprivileged_uid(boxed: GradingPool) -> None:
    # as root: a fresh uid of its own; else nobody, inside a user namespace
    assert boxed.call("os:getuid").value not in (0, os.geteuid())


def test_without_a_sandbox_the_pool_grades_unsandboxed_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "_helper_launch", lambda args, env: (None, "no namespaces here"))
    with GradingPool(workers=1) as pool:
        where, why = pool.isolation()
        assert where == "unsandboxed" and "no namespaces here" in why
        assert pool.compare("0.5", r"\frac12").correct
    with GradingPool(workers=1, sandbox=False) as pool:
        assert pool.isolation()[0] == "unsandboxed" and pool.call("os:getuid").value == os.getuid()


def test_a_required_sandbox_that_cannot_start_fails_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "_helper_launch", lambda args, env: (None, "no namespaces here"))
    monkeypatch.setenv("GEM_MATH_GRADER_SANDBOX", "1")
    with GradingPool(workers=1) as pool, pytest.raises(RuntimeError, match="no sandbox for the grading workers: no"):
        pool.compare("1", "1")


def test_a_malformed_sandbox_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEM_MATH_GRADER_SANDBOX", "yes")
    with pytest.raises(ValueError, match="GEM_MATH_GRADER_SANDBOX='yes'"):
        GradingPool(workers=1)


def test_gem_sandbox_shows_where_the_graders_run(capsys: pytest.CaptureFixture[str]) -> None:
    from gem_tools.plugin import cmd_sandbox

    assert cmd_sandbox([]) == 0
    assert f"math grader workers: {BACKENDS[0]} sandbox (forked from a grading template" in capsys.readouterr().out
