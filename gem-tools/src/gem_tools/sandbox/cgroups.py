"""Limits on a whole run, not on each of its processes: one cgroup per run.

rlimits bound each process alone, so a run that forks eight children may hold eight
times ``RLIMIT_AS``. A cgroup bounds them together: ``memory.max``/``pids.max`` under
cgroup v2 where the host delegates those controllers to us, else cgroup v1's
``memory.limit_in_bytes``/``pids.max`` (writable by root on many hosts that still mount
v1). Where neither can be written (an unprivileged caller on a host without
delegation) the run keeps only its per-process rlimits; :func:`support` says which
applies, and ``gem sandbox`` prints it.

The run enters its cgroup before anything of it starts: the host command line is
prefixed with a tiny ``sh`` that writes its own pid into the group and then ``exec``\\s
the sandbox, so every process of the run is born inside.

>>> support().mode in ("v2", "v1", "none")                       # doctest: +SKIP
True
"""

from __future__ import annotations

import functools
import os
import secrets
import signal
from dataclasses import dataclass
from pathlib import Path

from gem_tools.sandbox.limits import Limits

#: the sandbox's own helpers (bwrap's monitor and pid 1, setpriv, prlimit) are counted
#: by ``pids.max`` too: room for them on top of ``Limits.processes``
HELPER_PIDS = 4
_ENTER = 'for f in "$1" "$2"; do echo $$ > "$f" || exit 125; done; shift 2; exec "$@"'
_V1_ROOT = Path("/sys/fs/cgroup")
_PARENT = "gem-sandbox"


@dataclass(frozen=True)
class Support:
    """Which cgroup interface caps runs here: ``mode`` is ``"v2"``, ``"v1"`` or ``"none"``;
    ``memory``/``pids`` are the directories new run groups go under; ``detail`` says why."""

    mode: str
    memory: Path | None
    pids: Path | None
    detail: str


def _own(controller: str) -> str | None:
    """This process's cgroup path in the v1 hierarchy of ``controller`` (or v2 for "")."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers.split(",") == [controller] or (controller == "" and controllers == ""):
            return path
    return None


def _v2_mount() -> Path | None:
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def _try_parent(base: Path, files: tuple[str, ...]) -> str | None:
    """Make ``base/gem-sandbox`` and a probe group in it; ``None`` when limits can be set."""
    parent = base / _PARENT
    probe = parent / f"probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        parent.mkdir(exist_ok=True)
        probe.mkdir()
    except OSError as exc:
        return f"cannot create a group under {base}: {exc.strerror}"
    try:
        missing = [f for f in files if not (probe / f).exists()]
        if missing:
            return f"{base} has no {', '.join(missing)}"
        for name in files:
            (probe / name).write_text("max\n" if name.endswith(".max") else "-1\n")
        return None
    except OSError as exc:
        return f"cannot set limits under {base}: {exc.strerror}"
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


def _v2() -> Support | str:
    mount = _v2_mount()
    own = _own("")
    if mount is None or own is None:
        return "no cgroup v2 hierarchy is mounted"
    base = mount / own.lstrip("/")
    try:
        available = (mount / "cgroup.controllers").read_text().split()
    except OSError:
        return f"cannot read {mount}/cgroup.controllers"
    if not {"memory", "pids"} <= set(available):
        return f"cgroup v2 at {mount} offers {' '.join(available) or 'no controllers'}, not memory and pids"
    try:  # our groups live in a child of our own group: it must hand the controllers down
        (base / "cgroup.subtree_control").write_text("+memory +pids\n")
    except OSError:
        pass
    why = _try_parent(base, ("memory.max", "pids.max"))
    if why is not None:
        return f"cgroup v2: {why}"
    try:
        (base / _PARENT / "cgroup.subtree_control").write_text("+memory +pids\n")
    except OSError as exc:
        return f"cgroup v2: cannot enable memory and pids under {base / _PARENT}: {exc.strerror}"
    parent = base / _PARENT
    return Support("v2", parent, parent, f"cgroup v2 under {parent} (memory.max, pids.max)")


def _v1() -> Support | str:
    bases = {}
    for controller in ("memory", "pids"):
        own = _own(controller)
        root = _V1_ROOT / controller
        if own is None or not root.is_dir():
            return f"no cgroup v1 {controller} hierarchy is mounted"
        bases[controller] = root / own.lstrip("/")
    why = _try_parent(bases["memory"], ("memory.limit_in_bytes",)) or _try_parent(bases["pids"], ("pids.max",))
    if why is not None:
        return f"cgroup v1: {why}"
    memory, pids = bases["memory"] / _PARENT, bases["pids"] / _PARENT
    return Support("v1", memory, pids, f"cgroup v1 under {memory} and {pids} (memory.limit_in_bytes, pids.max)")


@functools.lru_cache(maxsize=1)
def support() -> Support:
    """How runs are capped on this host (probed once per process)."""
    if os.environ.get("GEM_SANDBOX_CGROUPS", "1") == "0":
        return Support("none", None, None, "disabled by GEM_SANDBOX_CGROUPS=0: per-process rlimits only")
    reasons = []
    for probe in (_v2, _v1):
        found = probe()
        if isinstance(found, Support):
            return found
        reasons.append(found)
    return Support("none", None, None, "; ".join(reasons) + ": per-process rlimits only (RLIMIT_AS per process, "
                   "RLIMIT_NPROC per run uid); a run's processes together may use more memory")  # fmt: skip


class RunGroup:
    """The cgroup of one run: created with its limits, entered by the run's first
    process, emptied and removed afterwards."""

    def __init__(self, where: Support, limits: Limits) -> None:
        name = f"run-{os.getpid()}-{secrets.token_hex(6)}"
        assert where.memory is not None and where.pids is not None
        self.v2 = where.mode == "v2"
        self.dirs = [where.memory / name] if self.v2 else [where.memory / name, where.pids / name]
        made: list[Path] = []
        try:
            for d in self.dirs:
                d.mkdir()
                made.append(d)
            self.set_limits(limits.run_memory or limits.memory, limits.processes + HELPER_PIDS)
        except OSError:
            for d in made:
                _rmdir(d)
            raise

    def set_limits(self, memory: int, pids: int) -> None:
        """Cap the group's memory (swap included: no way around the cap) and processes."""
        if self.v2:
            (self.dirs[0] / "memory.max").write_text(str(memory))
            swap = self.dirs[0] / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
            (self.dirs[0] / "pids.max").write_text(str(pids))
            return
        limit, memsw = self.dirs[0] / "memory.limit_in_bytes", self.dirs[0] / "memory.memsw.limit_in_bytes"
        # v1 keeps memory <= memory + swap at every step: raise the outer bound first
        order = [limit, memsw]
        if memsw.exists() and memory > int(memsw.read_text()):
            order.reverse()
        for path in order:
            if path.exists():
                path.write_text(str(memory))
        (self.dirs[1] / "pids.max").write_text(str(pids))

    def memory_usage(self) -> int:
        """Bytes of memory the group holds now."""
        name = "memory.current" if self.v2 else "memory.usage_in_bytes"
        return int((self.dirs[0] / name).read_text())

    def enter_argv(self) -> list[str]:
        """The prefix that puts the run's first process into this group."""
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        return ["/bin/sh", "-c", _ENTER, "gem-cgroup-enter", procs[0], procs[-1]]

    def oom_killed(self) -> bool:
        """Did the kernel kill a process of the run for going over ``run_memory``?"""
        return self.oom_kills() > 0

    def oom_kills(self) -> int:
        """How many processes the kernel has killed in this group for going over its memory cap."""
        name, key = ("memory.events", "oom_kill") if self.v2 else ("memory.oom_control", "oom_kill")
        try:
            for line in (self.dirs[0] / name).read_text().splitlines():
                field, _, value = line.partition(" ")
                if field == key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def pids(self) -> list[int]:
        found: set[int] = set()
        for d in self.dirs:
            try:
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(found)

    def kill(self) -> bool:
        """SIGKILL every process in the group; True when it is empty."""
        kill_file = self.dirs[0] / "cgroup.kill"
        if self.v2 and kill_file.exists():
            try:
                kill_file.write_text("1")
            except OSError:
                pass
        pids = self.pids()
        # a pid read from cgroup.procs may exit and be reused by a process outside the group
        # before it is signalled: pin each one with a pidfd, then signal only those the group
        # still lists (a pidfd never refers to a later process of the same number)
        pinned: dict[int, int] = {}
        for pid in pids:
            try:
                pinned[pid] = os.pidfd_open(pid)
            except OSError:
                continue
        try:
            members = set(self.pids())
            for pid, fd in pinned.items():
                if pid in members:
                    try:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        finally:
            for fd in pinned.values():
                os.close(fd)
        return not pids

    def remove(self) -> bool:
        """Remove the group (it must be empty); True when gone."""
        return all([_rmdir(d) for d in self.dirs])


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False
