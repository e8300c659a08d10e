"""Trusted helpers in the sandbox (gem_tools.sandbox.helper): a long-lived Python process of
ours gets a run's isolation and sees the running process's import path read-only; other
packages report what of theirs runs sandboxed through the `gem_tools.sandboxed` group."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import gem_tools
from gem_tools import plugin
from gem_tools.sandbox.helper import PATH_DIR, helper_launch, import_path

ISOLATING = ("bwrap", "unshare")  # as conftest's: a backend that does not work here fails (CI installs bwrap)

PROBE = """
import json, os, socket, sys
import gem_tools  # ours, from the import path
out = {"uid": os.getuid(), "gem_tools": gem_tools.__file__, "home": os.path.exists(sys.argv[1]), "net": None}
try:
    socket.create_connection(("1.1.1.1", 53), 2)
except OSError as exc:
    out["net"] = exc.errno
try:
    open(os.path.join(os.path.dirname(gem_tools.__file__), "written"), "w")
except OSError as exc:
    out["write"] = exc.errno
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", ISOLATING)
def test_a_helper_sees_our_packages_read_only_and_nothing_else(backend):
    project = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(gem_tools.__file__))))
    launch = helper_launch(["-c", PROBE, project], backend=backend)
    try:
        done = subprocess.run(launch.argv, env=launch.env, pass_fds=launch.pass_fds, user=launch.user,
                              group=launch.group, capture_output=True, text=True, timeout=60)  # fmt: skip
    finally:
        launch.close()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["gem_tools"].startswith(PATH_DIR + "/")
    assert seen["home"] is False  # the project, less the import path, is not there
    assert seen["net"] is not None and seen["write"] == 30  # EROFS
    assert seen["uid"] not in (0, os.geteuid())


def test_the_import_path_leaves_out_the_standard_library():
    stdlib = os.path.dirname(os.__file__)
    assert import_path() and not any(p == stdlib or p.startswith(stdlib + os.sep) for p in import_path())
    assert any(os.path.abspath(gem_tools.__file__).startswith(p) for p in import_path())


def test_gem_sandbox_shows_what_other_packages_run_sandboxed(capsys, monkeypatch):
    class Entry:
        def __init__(self, name, report):
            self.name, self.report = name, report

        def load(self):
            return self.report

    def broken():
        raise RuntimeError("no idea")

    entries = [Entry("zeta", lambda: [("zeta workers", "bwrap sandbox", "kept warm")]), Entry("alpha", broken)]
    monkeypatch.setattr("importlib.metadata.entry_points",
                        lambda group: entries if group == plugin.SANDBOXED_GROUP else [])  # fmt: skip
    assert plugin.cmd_sandbox([]) == 0
    out = capsys.readouterr().out.splitlines()
    # one package's failure is one line, not the command's
    assert out[-2:] == ["alpha: cannot say (RuntimeError: no idea)", "zeta workers: bwrap sandbox (kept warm)"]

