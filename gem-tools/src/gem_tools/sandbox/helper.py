"""Trusted helper processes kept inside the sandbox: a long-lived Python process that runs
our own code on untrusted input (the math grader's template, which forks its grading
workers) gets the same isolation as a run, without being one.

It sees what a run sees (no network, read-only system dirs and interpreter, a private
``/tmp``, an unprivileged uid, fresh pid/ipc/uts namespaces) plus the running process's
import path, read-only: a helper imports our packages and their dependencies as this
process does (editable installs included), never the project's other files, home
directories or data. Unlike a run it has no wall clock, CPU or memory limit of its own
(high ceilings only: the processes it forks set theirs) and lives until its owner stops
it. It dies with the thread that started it (``--die-with-parent``): start it from a
thread that lives as long as it should.

>>> launch = helper_launch(["-c", "print(1)"])  # doctest: +SKIP
>>> subprocess.run(launch.argv, env=launch.env, pass_fds=launch.pass_fds)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence

from gem_tools.sandbox.backends import Job, Launch
from gem_tools.sandbox.layout import WORKDIR, interpreter, sandbox_env
from gem_tools.sandbox.limits import CEILINGS, Limits

#: where the entries of the import path appear inside the sandbox (``/gem/path/0``, ...)
PATH_DIR = "/gem/path"


def import_path() -> list[str]:
    """The running process's import path less the standard library: what a helper sees."""
    stdlib = os.path.dirname(os.__file__)
    seen: list[str] = []
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if not real or real in seen or not os.path.exists(real):
            continue
        if real == stdlib or real.startswith(stdlib + os.sep):
            continue
        seen.append(real)
    return seen


def helper_launch(args: Sequence[str], backend: str = "auto", env: Mapping[str, str] | None = None,
                  tmp_size: int = 64 << 20) -> Launch:  # fmt: skip
    """The host command that runs ``python -s ARGS`` as a helper in ``backend``'s isolation
    (raises :class:`~gem_tools.sandbox.backends.SandboxUnavailableError` where no isolating
    backend works). Pass ``launch.pass_fds`` and your own fds to ``Popen``; the fd numbers
    are kept inside."""
    from gem_tools.sandbox import resolve_backend

    chosen = resolve_backend(backend)
    if not chosen.isolated:
        raise ValueError(f"a helper needs an isolating backend, not {chosen.name!r}")
    base = interpreter(None)
    binds = tuple((host, f"{PATH_DIR}/{i}") for i, host in enumerate(import_path()))
    seen = dataclasses.replace(base, packages=binds)
    extra = {**(env or {}), "PYTHONPATH": ":".join(inside for _, inside in binds)}
    limits = Limits(tmp_size=tmp_size, **CEILINGS)
    return chosen.launch(Job([base.executable, "-s", *args], {}, sandbox_env(WORKDIR, extra), limits, seen))


__all__ = ["PATH_DIR", "helper_launch", "import_path"]
