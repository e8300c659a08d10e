"""The three ways to start a sandboxed process: bubblewrap, ``unshare``, bare rlimits.

Each backend turns a :class:`Job` (what to run, inside-the-sandbox view) into a
:class:`Launch` (the host command line, its environment and the file descriptors it
needs). Running it, capping its output and killing it is the runner's job.

Limits: ``RLIMIT_NPROC`` is ignored for root, so a root caller's runs execute under
an unprivileged uid, a fresh random one per run, so that concurrent runs never count
against (or signal) each other. A non-root caller's runs keep its uid on the host and
appear as uid 65534 inside their user namespace.

Every process of the bwrap and unshare backends (runs, warm zygotes, helpers) runs under
:func:`gem_tools.sandbox.seccomp.keyring_filter`: the kernel's keyrings would outlive them.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import secrets
import shutil
import subprocess
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gem_tools.sandbox.layout import DEVICES, WORKDIR, Interpreter, system_entries
from gem_tools.sandbox.limits import Limits
from gem_tools.sandbox.seccomp import filter_fd, keyring_filter

NOBODY = 65534
_INIT = str(Path(__file__).with_name("_unshare_init.py"))


class SandboxUnavailableError(RuntimeError):
    """No isolating backend works on this machine (or the one asked for does not)."""


@dataclass
class Job:
    """One run as the sandbox sees it: ``argv`` runs in :data:`WORKDIR` holding ``files``."""

    argv: list[str]
    files: dict[str, bytes]
    env: dict[str, str]
    limits: Limits
    interpreter: Interpreter


@dataclass
class Launch:
    """A host command line ready for ``subprocess.Popen``."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    user: int | None = None
    group: int | None = None
    cwd: str | None = None
    #: the uid the program runs as on the host when it is not the caller's
    host_uid: int | None = None
    #: bwrap and our unshare init report "killed by signal N" as exit code 128 + N
    signal_as_128: bool = True
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.pass_fds = ()
        for fn in self.cleanup:
            fn()
        self.cleanup = []


def _run_uid() -> tuple[int | None, int | None]:
    """The host uid/gid for one run: a fresh unprivileged one when we are root."""
    if os.geteuid() != 0:
        return None, None
    uid = 1_000_000 + secrets.randbelow(1_000_000_000)
    return uid, uid


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("gem-sandbox", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _rlimit_args(limits: Limits) -> list[str]:
    cpu = int(limits.cpu_time or 1)
    return [
        f"--as={limits.memory}",
        f"--cpu={cpu}:{cpu + 1}",
        f"--fsize={limits.file_size}",
        f"--nofile={limits.open_files}",
        f"--nproc={limits.processes}",
        "--core=0",
    ]


def _rlimits(limits: Limits) -> dict[str, list[int]]:
    cpu = int(limits.cpu_time or 1)
    return {
        "RLIMIT_AS": [limits.memory] * 2,
        "RLIMIT_CPU": [cpu, cpu + 1],
        "RLIMIT_FSIZE": [limits.file_size] * 2,
        "RLIMIT_NOFILE": [limits.open_files] * 2,
        "RLIMIT_NPROC": [limits.processes] * 2,
        "RLIMIT_CORE": [0, 0],
    }


class Backend(ABC):
    """How to start a sandboxed process."""

    name: str
    #: False for the rlimit backend, which is no isolation at all
    isolated: bool = True

    @abstractmethod
    def why_unavailable(self) -> str | None:
        """``None`` when the backend works here, else the reason it does not."""

    @abstractmethod
    def launch(self, job: Job) -> Launch:
        """The host command that runs ``job``."""


class BwrapBackend(Backend):
    """bubblewrap: new user (unless root), pid, net, ipc, uts and mount namespaces."""

    name = "bwrap"

    @functools.cached_property
    def _probe(self) -> str | None:
        exe = shutil.which("bwrap")
        if exe is None:
            return "bwrap is not installed (apt-get install bubblewrap)"
        job = Job(["true"], {}, {"PATH": "/usr/bin:/bin"}, Limits(), Interpreter("/usr/bin/true", ()))
        launch = self.launch(job)
        try:
            out = subprocess.run(
                launch.argv, env=launch.env, pass_fds=launch.pass_fds, user=launch.user, group=launch.group,
                extra_groups=[] if launch.user is not None else None, capture_output=True, timeout=30,
            )
        finally:
            launch.close()
        if out.returncode != 0:
            return f"bwrap cannot create namespaces here: {out.stderr.decode(errors='replace').strip()}"
        return None

    def why_unavailable(self) -> str | None:
        return self._probe

    def launch(self, job: Job) -> Launch:
        uid, gid = _run_uid()
        argv = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                "--die-with-parent", "--new-session", "--hostname", "sandbox"]
        if uid is None:
            argv += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--disable-userns"]
        else:
            # bwrap runs as root (to reach interpreters under /root); setpriv below drops
            # to the run's uid, and only the caps setpriv needs survive until then
            argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                     "--cap-add", "CAP_SETPCAP"]
        made: set[str] = {"/"}
        for path, target in system_entries():
            argv += ["--symlink", target, path] if target else ["--ro-bind", path, path]
            made.add(path)
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--perms", "1777", "--size", str(job.limits.tmp_size), "--tmpfs", WORKDIR]
        made.add(WORKDIR)
        # after the tmpfs, so that an interpreter living under /tmp stays visible
        for path in job.interpreter.dirs:
            argv += _parents(path, made)
            argv += ["--ro-bind", path, path]
        for path in job.interpreter.hidden:
            argv += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
        for host, inside in job.interpreter.packages:
            argv += _parents(inside, made)
            argv += ["--ro-bind", host, inside]
        fds = []
        for name, data in job.files.items():
            fd = _memfd(data)
            fds.append(fd)
            argv += _parents(f"{WORKDIR}/{name}", made, perms="1777")
            argv += ["--perms", "0666", "--file", str(fd), f"{WORKDIR}/{name}"]
        argv += ["--chdir", WORKDIR]
        seccomp = filter_fd()
        if seccomp is not None:  # installed by bwrap just before it executes the command below
            fds.append(seccomp)
            argv += ["--seccomp", str(seccomp)]
        if uid is not None:
            argv += ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs",
                     "--inh-caps=-all", "--bounding-set=-all", "--"]
        argv += ["prlimit", *_rlimit_args(job.limits), "--", *job.argv]
        return Launch(argv, job.env, tuple(fds), host_uid=uid)


def _parents(path: str, made: set[str], perms: str = "0755") -> list[str]:
    """bwrap ``--dir`` ops for the missing parents of ``path`` (world-traversable, or
    world-writable with ``perms="1777"`` for dirs inside the work dir)."""
    out: list[str] = []
    parts = Path(path).parent.parts
    for i in range(2, len(parts) + 1):
        d = "/" + "/".join(parts[1:i])
        if d not in made:
            out += ["--perms", perms, "--dir", d]
            made.add(d)
    return out


class UnshareBackend(Backend):
    """util-linux ``unshare`` plus our own init (``_unshare_init.py``) that builds the root."""

    name = "unshare"

    @functools.cached_property
    def _probe(self) -> str | None:
        if shutil.which("unshare") is None:
            return "unshare (util-linux) is not installed"
        job = Job(["/bin/true"], {}, {"PATH": "/usr/bin:/bin"}, Limits(), Interpreter("/usr/bin/true", ()))
        launch = self.launch(job)
        try:
            out = subprocess.run(launch.argv, env=launch.env, pass_fds=launch.pass_fds, capture_output=True,
                                 timeout=30)
        finally:
            launch.close()
        if out.returncode != 0:
            return f"unshare cannot create namespaces here: {out.stderr.decode(errors='replace').strip()}"
        return None

    def why_unavailable(self) -> str | None:
        return self._probe

    def launch(self, job: Job) -> Launch:
        import sys

        uid, gid = _run_uid()
        binds = [p for p, target in system_entries() if not target] + list(job.interpreter.dirs)
        plan = {
            "root": _mount_point(binds),
            "binds": binds,
            "hidden": list(job.interpreter.hidden),
            "packages": [list(pair) for pair in job.interpreter.packages],
            "symlinks": [[p, t] for p, t in system_entries() if t],
            "devices": list(DEVICES),
            "workdir": WORKDIR,
            "tmp_size": job.limits.tmp_size,
            "files": {name: base64.b64encode(data).decode() for name, data in job.files.items()},
            "uid": uid,
            "gid": gid,
            "rlimits": _rlimits(job.limits),
            "seccomp": base64.b64encode(keyring_filter() or b"").decode(),
            "argv": job.argv,
            "env": job.env,
        }
        fd = _memfd(json.dumps(plan).encode())
        argv = ["unshare", "--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child"]
        if uid is None:
            # --keep-caps: our init needs its namespace caps across exec; it drops them
            # (clears the ambient set) before it executes the program
            argv += [f"--map-user={NOBODY}", f"--map-group={NOBODY}", "--keep-caps"]
        argv += ["--", sys.executable, "-I", "-S", _INIT, str(fd)]
        return Launch(argv, {"PATH": "/usr/bin:/bin"}, (fd,), host_uid=uid)


def _mount_point(binds: list[str]) -> str:
    """An existing host dir to mount the new root on (hidden only inside the sandbox)."""
    for candidate in ("/mnt", "/media", "/srv", "/opt", "/tmp"):
        if os.path.isdir(candidate) and not any(b == candidate or b.startswith(candidate + "/") for b in binds):
            return candidate
    raise SandboxUnavailableError("unshare backend: no free directory to mount the sandbox root on")


class RlimitBackend(Backend):
    """rlimits and a temp dir, nothing else: NOT isolation (network, files, /proc are open).

    Only used when asked for by name, e.g. on machines that allow no namespaces.
    """

    name = "rlimit"
    isolated = False

    def why_unavailable(self) -> str | None:
        return None if shutil.which("prlimit") else "prlimit (util-linux) is not installed"

    def launch(self, job: Job) -> Launch:
        uid, gid = _run_uid()
        workdir = tempfile.mkdtemp(prefix="gem-sandbox-")
        os.chmod(workdir, 0o700)
        if uid is not None:
            os.chown(workdir, uid, gid)
        for name, data in job.files.items():
            path = os.path.join(workdir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Path(path).write_bytes(data)
            if uid is not None:
                os.chown(path, uid, gid)
        env = {**job.env, "HOME": workdir, "TMPDIR": workdir}
        if job.interpreter.packages:  # no mounts, no allow-list: their whole site dir is on the path
            env["PYTHONPATH"] = os.pathsep.join(os.path.dirname(host) for host, _ in job.interpreter.packages)
        argv = ["prlimit", *_rlimit_args(job.limits), "--", *job.argv]
        if uid is not None:
            # dropped by setpriv rather than by Popen, so that the run's cgroup can be
            # entered first (see cgroups.RunGroup.enter_argv), as root
            argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs", "--", *argv]
        launch = Launch(argv, env, (), cwd=workdir, host_uid=uid, signal_as_128=False)
        launch.cleanup.append(functools.partial(shutil.rmtree, workdir, ignore_errors=True))
        return launch


BACKENDS: dict[str, Backend] = {b.name: b for b in (BwrapBackend(), UnshareBackend(), RlimitBackend())}
#: the order ``backend="auto"`` tries; the rlimit backend is never chosen automatically
AUTO_ORDER = ("bwrap", "unshare")
