"""What the sandbox can see of the host filesystem: an allow-list, not a deny-list.

A sandboxed run sees the system directories (read-only), the Python interpreter it
runs with its standard library (read-only), the packages it was allowed
(:data:`PACKAGES_DIR`, on ``PYTHONPATH``), a fresh ``/proc``, a few device nodes and a
private writable ``/tmp``. Home directories, ``/root``, the project, virtual
environments and every ``site-packages``/``dist-packages`` directory (where a dataset
wheel may be installed) are absent or hidden under an empty tmpfs.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

#: host directories every run sees read-only (when they exist)
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: third-party package dirs of system interpreters: hidden even though /usr is visible
SYSTEM_SITE_GLOBS = ("/usr/lib/python3*/dist-packages", "/usr/lib/python3*/site-packages",
                     "/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages")  # fmt: skip
#: device nodes bound into the sandbox's /dev
DEVICES = ("null", "zero", "full", "random", "urandom")
#: the sandbox's working directory (a private tmpfs)
WORKDIR = "/tmp"
#: where allowed packages appear inside the sandbox (on ``PYTHONPATH``)
PACKAGES_DIR = "/gem/site-packages"

# run in the interpreter to describe (-I: no user site, no PYTHONPATH); prints JSON
_PROBE = """
import importlib.util, json, os, site, sys, sysconfig
stdlib = [os.path.dirname(os.__file__), sysconfig.get_config_var("DESTSHARED") or ""]
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    stdlib.append(sysconfig.get_config_var("LIBDIR") or "")
stdlib = [p for p in stdlib if p]
sites = site.getsitepackages() + [site.getusersitepackages(), os.path.join(stdlib[0], "site-packages")]
base_paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})
sites += [base_paths["purelib"], base_paths["platlib"]]
sites += [p for p in sys.path if p and not any(p == s or p.startswith(s + os.sep) for s in stdlib)]
packages = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin in (None, "built-in", "frozen") and not spec.submodule_search_locations:
        packages[name] = None
        continue
    paths = list(spec.submodule_search_locations or [spec.origin])
    paths += [os.path.join(os.path.dirname(p), name + ".libs") for p in paths]
    packages[name] = [p for p in paths if os.path.exists(p)]
base = getattr(sys, "_base_executable", None) or sys.executable
print(json.dumps({"executable": os.path.realpath(base), "stdlib": stdlib, "sites": sites, "packages": packages}))
"""


class UnknownPackageError(ValueError):
    """A package allowed into the sandbox is not installed for its interpreter."""


@dataclass(frozen=True)
class Interpreter:
    """A Python interpreter as a sandbox runs it: the host directories it needs
    (``dirs``, bound read-only), the ones to hide inside them (``hidden``: its
    site-packages), and the allowed packages (``packages``: host path, path inside)."""

    executable: str
    dirs: tuple[str, ...]
    hidden: tuple[str, ...] = ()
    packages: tuple[tuple[str, str], ...] = ()


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


def hidden_dirs(sites: list[str], visible: tuple[str, ...]) -> tuple[str, ...]:
    """The site dirs (the interpreter's and system interpreters') that a run would see:
    those inside the system dirs or inside ``visible``."""
    candidates = [*sites, *(p for pattern in SYSTEM_SITE_GLOBS for p in glob.glob(pattern))]
    roots = (*SYSTEM_DIRS, *visible)
    real = sorted({os.path.realpath(p) for p in candidates if p and os.path.isdir(p)})
    return tuple(p for p in real if any(_under(p, r) for r in roots))


@functools.lru_cache(maxsize=32)
def interpreter(executable: str | None = None, packages: Sequence[str] = ()) -> Interpreter:
    """Describe ``executable`` (default: the running interpreter) as a sandbox runs it:
    its base interpreter (a virtual environment's own packages are not carried along),
    the standard library, and of all installed packages only ``packages``.

    >>> interpreter().executable == os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    True
    """
    exe = os.path.abspath(executable or sys.executable)
    probe = [exe, "-I", "-c", _PROBE, *packages]
    out = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(out.stdout)
    missing = [name for name, paths in found["packages"].items() if not paths]
    if missing:
        raise UnknownPackageError(
            f"packages allowed into the sandbox are not installed for {exe}: {', '.join(missing)} "
            "(pip install them into that interpreter's environment)"
        )
    base = found["executable"]
    dirs = minimal_dirs([*found["stdlib"], os.path.dirname(base)])
    allowed = tuple(
        (os.path.realpath(path), f"{PACKAGES_DIR}/{os.path.basename(path)}")
        for name in packages for path in found["packages"][name]
    )  # fmt: skip
    return Interpreter(base, dirs, hidden_dirs(found["sites"], dirs), allowed)


def system_entries() -> list[tuple[str, str | None]]:
    """``(path, symlink_target_or_None)`` for each system dir present on this host."""
    entries = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            entries.append((path, os.readlink(path)))
        elif os.path.isdir(path):
            entries.append((path, None))
    return entries


def sandbox_env(workdir: str, extra: dict[str, str] | None = None, packages: bool = False) -> dict[str, str]:
    """The whole environment a run gets: nothing is inherited from the parent
    (``packages``: the allowed packages' dir is on ``PYTHONPATH``)."""
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
    if packages:
        env["PYTHONPATH"] = PACKAGES_DIR
    env.update(extra or {})
    return env
