"""RunGroup.kill signals the group's processes and nothing else, even when a pid it read
is reused by a process outside the group before the signal (cgroup v1 has no
``cgroup.kill``: the pids are read from ``cgroup.procs`` and signalled one by one).

The group's directories here are plain folders holding a ``cgroup.procs`` file: the kill
path reads that file exactly as it reads a mounted cgroup's, and the processes are real.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gem_tools.sandbox.cgroups import RunGroup


def _group(tmp_path: Path) -> RunGroup:
    group = RunGroup.__new__(RunGroup)  # no cgroup is mounted for the test: its files only
    group.v2 = False
    group.dirs = [tmp_path / "memory", tmp_path / "pids"]
    for d in group.dirs:
        d.mkdir()
        (d / "cgroup.procs").write_text("")
    return group


def test_kill_signals_the_listed_processes(tmp_path: Path) -> None:
    group = _group(tmp_path)
    member = subprocess.Popen(["sleep", "60"])
    try:
        (group.dirs[0] / "cgroup.procs").write_text(f"{member.pid}\n")
        assert group.kill() is False  # it was not empty yet
        assert member.wait(timeout=10) == -9
        (group.dirs[0] / "cgroup.procs").write_text("")
        assert group.kill() is True
    finally:
        member.kill()
        member.wait()


def test_a_pid_that_left_the_group_before_the_signal_is_spared(tmp_path: Path, monkeypatch) -> None:
    """The first read lists a pid; by the time it is pinned the group no longer lists it
    (its process exited and the number went to someone else): no signal."""
    group = _group(tmp_path)
    bystander = subprocess.Popen(["sleep", "60"])
    reads = iter([[bystander.pid], []])
    monkeypatch.setattr(group, "pids", lambda: next(reads))
    try:
        group.kill()
        with pytest.raises(subprocess.TimeoutExpired):  # still alive a second later
            bystander.wait(timeout=1)
    finally:
        bystander.kill()
        bystander.wait()
