"""Run untrusted Python code, or a command, in a sandbox.

>>> from gem_tools.sandbox import Sandbox
>>> box = Sandbox()                       # bubblewrap, else unshare
>>> r = box.run_python("print(6 * 7)")
>>> r.status.value, r.stdout, r.backend  # doctest: +SKIP
('ok', '42\\n', 'bwrap')

Each run gets: no network, a private writable ``/tmp`` (its working directory), a
read-only view of the system and interpreter directories and nothing else of the
host, an unprivileged uid, and the :class:`Limits` (wall clock, CPU, memory, file
size, open files, processes, output). Backends, tried in order by ``"auto"``:
``bwrap`` (bubblewrap), ``unshare`` (util-linux, with our own root-building init);
``rlimit`` applies only the limits, is no isolation, and runs only when asked for by
name.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from gem_tools.sandbox.backends import AUTO_ORDER, BACKENDS, Backend, Job, Launch, SandboxUnavailableError
from gem_tools.sandbox.layout import WORKDIR, Interpreter, interpreter, sandbox_env
from gem_tools.sandbox.limits import Limits, MiB
from gem_tools.sandbox.result import SandboxResult, Status
from gem_tools.sandbox.runner import execute

#: threads that wait on sandboxed processes for the async entry points
_POOL = ThreadPoolExecutor(max_workers=64, thread_name_prefix="gem-sandbox")
_warned_rlimit = False


def available_backends() -> dict[str, str | None]:
    """Each backend's name and ``None`` if it works here, else why it does not."""
    return {name: backend.why_unavailable() for name, backend in BACKENDS.items()}


def resolve_backend(name: str = "auto") -> Backend:
    """The backend ``name`` names, or for ``"auto"`` the first isolating one that works."""
    global _warned_rlimit
    if name == "auto":
        reasons = []
        for candidate in AUTO_ORDER:
            why = BACKENDS[candidate].why_unavailable()
            if why is None:
                return BACKENDS[candidate]
            reasons.append(f"{candidate}: {why}")
        raise SandboxUnavailableError(
            "No isolating sandbox backend works here (" + "; ".join(reasons) + "). Install bubblewrap "
            "(apt-get install bubblewrap) or allow unprivileged user namespaces; "
            "Sandbox(backend='rlimit') runs with resource limits only and is NOT isolation."
        )
    if name not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {name!r}; choose from auto, {', '.join(BACKENDS)}")
    backend = BACKENDS[name]
    why = backend.why_unavailable()
    if why is not None:
        raise SandboxUnavailableError(f"sandbox backend {name!r} does not work here: {why}")
    if not backend.isolated and not _warned_rlimit:
        _warned_rlimit = True
        warnings.warn(
            "gem_tools sandbox backend 'rlimit' is NOT isolation: code can use the network and "
            "read and write whatever the run's uid may; only resource limits apply.",
            RuntimeWarning,
            stacklevel=3,
        )
    return backend


class Sandbox:
    """A reusable sandbox configuration; each ``run_*`` call is a fresh, isolated run.

    >>> box = Sandbox(limits=Limits(timeout=2))
    >>> box.run_command(["sh", "-c", "echo hi >&2; exit 3"]).exit_code  # doctest: +SKIP
    3

    ``python`` picks the interpreter that ``run_python`` uses (default: the running
    one); its installed packages (numpy, sympy, ...) are importable in the sandbox.
    """

    def __init__(
        self,
        backend: str = "auto",
        limits: Limits | None = None,
        python: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.backend = resolve_backend(backend)
        self.limits = limits or Limits()
        if python is None and not self.backend.isolated and os.geteuid() == 0 and not _others_can_run(sys.executable):
            # the rlimit backend runs as an unprivileged uid on the real filesystem
            python = "/usr/bin/python3"
        self.interpreter: Interpreter = interpreter(python)
        self.env = dict(env or {})

    @property
    def backend_name(self) -> str:
        return self.backend.name

    def run_python(
        self,
        code: str,
        stdin: str | bytes = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
        args: Sequence[str] = (),
    ) -> SandboxResult:
        """Run ``code`` as ``main.py`` in the sandbox's working directory."""
        all_files = {**(files or {}), "main.py": code}
        return self.run_command([self.interpreter.executable, "-s", "main.py", *args], stdin, all_files, limits)

    def run_command(
        self,
        argv: Sequence[str],
        stdin: str | bytes = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> SandboxResult:
        """Run ``argv`` (resolved on the sandbox's ``PATH``) with ``files`` in its working dir."""
        launch, data, lim = self.prepare(argv, stdin, files, limits)
        return execute(launch, data, lim, self.backend.name)

    def prepare(
        self,
        argv: Sequence[str],
        stdin: str | bytes = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> tuple[Launch, bytes, Limits]:
        """The host command line of one run, its stdin and limits, ready to execute
        (:meth:`run_command` runs it; ``gem_tools.sandbox_aio`` runs it under asyncio)."""
        if not argv:
            raise ValueError("run_command needs a non-empty argv")
        lim = limits or self.limits
        data = {_check_name(k): _bytes(v) for k, v in (files or {}).items()}
        job = Job(list(argv), data, sandbox_env(WORKDIR, self.env), lim, self.interpreter)
        return self.backend.launch(job), _bytes(stdin), lim

    async def arun_python(self, code: str, **kwargs) -> SandboxResult:
        """Async :meth:`run_python`: many can run at once without blocking the loop."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_POOL, functools.partial(self.run_python, code, **kwargs))

    async def arun_command(self, argv: Sequence[str], **kwargs) -> SandboxResult:
        """Async :meth:`run_command`."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_POOL, functools.partial(self.run_command, argv, **kwargs))


def _bytes(value: str | bytes) -> bytes:
    # agents emit lone surrogates too: they become U+FFFD rather than an exception
    return value.encode("utf-8", errors="replace") if isinstance(value, str) else bytes(value)


def _others_can_run(path: str) -> bool:
    """Can a uid other than the owner execute ``path`` (every parent dir traversable)?"""
    real = os.path.realpath(path)
    parts = real.split("/")
    dirs = ["/".join(parts[:i]) or "/" for i in range(1, len(parts))]
    try:
        return all(os.stat(d).st_mode & 0o001 for d in dirs) and bool(os.stat(real).st_mode & 0o005 == 0o005)
    except OSError:
        return False


def _check_name(name: str) -> str:
    norm = os.path.normpath(name)
    if os.path.isabs(norm) or norm.startswith(".."):
        raise ValueError(f"sandbox file names are relative to the working dir, got {name!r}")
    return norm


@functools.lru_cache(maxsize=1)
def default_sandbox() -> Sandbox:
    """A shared :class:`Sandbox` with the default backend and limits."""
    return Sandbox()


def run_python(code: str, **kwargs) -> SandboxResult:
    """Run ``code`` in :func:`default_sandbox` (see :meth:`Sandbox.run_python`)."""
    return default_sandbox().run_python(code, **kwargs)


__all__ = [
    "Limits",
    "MiB",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailableError",
    "Status",
    "available_backends",
    "default_sandbox",
    "resolve_backend",
    "run_python",
]
