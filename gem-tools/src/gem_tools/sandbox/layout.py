"""What the sandbox can see of the host filesystem: an allow-list, not a deny-list.

A sandboxed run sees the system directories (read-only), the directories of the
Python interpreter it runs (read-only), a fresh ``/proc``, a few device nodes and a
private writable ``/tmp``. Home directories, ``/root``, the project and everything
else are simply absent.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import dataclass

#: host directories every run sees read-only (when they exist)
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: device nodes bound into the sandbox's /dev
DEVICES = ("null", "zero", "full", "random", "urandom")
#: the sandbox's working directory (a private tmpfs)
WORKDIR = "/tmp"

_PROBE = (
    "import json, site, sys;"
    "print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]"
    " + site.getsitepackages()))"
)


@dataclass(frozen=True)
class Interpreter:
    """A Python interpreter and the host directories it needs to run."""

    executable: str
    dirs: tuple[str, ...]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def minimal_dirs(paths: list[str]) -> tuple[str, ...]:
    """Existing real paths outside the system dirs, without ones nested in others."""
    real = sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})
    kept: list[str] = []
    for path in real:
        if path == "/" or any(_under(path, s) for s in SYSTEM_DIRS) or any(_under(path, k) for k in kept):
            continue
        kept.append(path)
    return tuple(kept)


@functools.lru_cache(maxsize=16)
def interpreter(executable: str | None = None) -> Interpreter:
    """Describe ``executable`` (default: the running interpreter).

    >>> interpreter().executable == os.path.abspath(sys.executable)
    True
    """
    exe = os.path.abspath(executable or sys.executable)
    if exe == os.path.abspath(sys.executable):
        import site

        found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages()]
    else:
        out = subprocess.run([exe, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=30, check=True)
        found = json.loads(out.stdout)
    chain = [os.path.dirname(os.path.abspath(exe)), os.path.dirname(os.path.realpath(exe))]
    return Interpreter(exe, minimal_dirs(found + chain))


def system_entries() -> list[tuple[str, str | None]]:
    """``(path, symlink_target_or_None)`` for each system dir present on this host."""
    entries = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            entries.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            entries.append((path, None))
    return entries


def sandbox_env(workdir: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment a run gets: nothing is inherited from the parent."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        # one BLAS thread: the process limit counts threads, and runs share the CPUs
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
    }
    env.update(extra or {})
    return env
