"""Run untrusted Python code, or a command, in a sandbox.

>>> from gem_tools.sandbox import Sandbox
>>> box = Sandbox()                       # bubblewrap, else unshare
>>> r = box.run_python("print(6 * 7)")
>>> r.status.value, r.stdout, r.backend  # doctest: +SKIP
('ok', '42\\n', 'bwrap')

Each run gets: no network, a private writable ``/tmp`` (its working directory), a
read-only view of the system directories and of the interpreter's standard library,
the packages it was allowed (``packages=``) and nothing else of the host (no
site-packages, no project, no data), an unprivileged uid, a cgroup capping the whole
run's memory and processes where the host allows one (:func:`cgroups.support`), and
the :class:`Limits` (wall clock, CPU, memory, file size, open files, processes,
output). Backends, tried in order by ``"auto"``:
``bwrap`` (bubblewrap), ``unshare`` (util-linux, with our own root-building init);
``rlimit`` applies only the limits, is no isolation, and runs only when asked for by
name.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import AsyncIterator, Mapping, Sequence

from gem_tools.sandbox import cgroups
from gem_tools.sandbox.backends import AUTO_ORDER, BACKENDS, Backend, Job, Launch, SandboxUnavailableError
from gem_tools.sandbox.layout import WORKDIR, Interpreter, UnknownPackageError, interpreter, sandbox_env
from gem_tools.sandbox.limits import Limits, MiB
from gem_tools.sandbox.resident import ResidentRun
from gem_tools.sandbox.result import SandboxResult, Status
from gem_tools.sandbox.runner import Process, aexecute, begin, complete, execute, run_sync, start
from gem_tools.sandbox.warm import Pool, WarmProcess, WarmUnavailable, pool_for

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
    one; a virtual environment runs as its base interpreter). Runs see its standard
    library and, of everything installed, only ``packages`` (import names, e.g.
    ``("numpy", "sympy", "mpmath")``: list a package's dependencies too).

    Python runs (``run_python``, ``arun_python``, ``open_python``) are *warm* where the
    backend allows it: forked from a zygote waiting in the same isolation (see
    :mod:`gem_tools.sandbox.warm`), which spares each run the sandbox's and the
    interpreter's start. ``warm=None`` chooses automatically, ``False`` always starts
    cold; :meth:`path` says which one runs and why. Commands always start cold.
    """

    def __init__(
        self,
        backend: str = "auto",
        limits: Limits | None = None,
        python: str | None = None,
        env: Mapping[str, str] | None = None,
        packages: Sequence[str] = (),
        warm: bool | None = None,
    ) -> None:
        self.backend = resolve_backend(backend)
        self.warm = warm
        self.limits = limits or Limits()
        if python is None and not self.backend.isolated and os.geteuid() == 0 and not _others_can_run(sys.executable):
            # the rlimit backend runs as an unprivileged uid on the real filesystem
            python = "/usr/bin/python3"
        self.interpreter: Interpreter = interpreter(python, tuple(packages))
        self.env = dict(env or {})

    @property
    def backend_name(self) -> str:
        return self.backend.name

    def path(self) -> tuple[str, str]:
        """``("warm" | "cold", why)``: how this sandbox starts its Python runs."""
        why = self._cold_reason()
        return ("cold", why) if why else ("warm", "forked from a zygote kept in the same isolation")

    def _cold_reason(self) -> str | None:
        if self.warm is False:
            return "Sandbox(warm=False)"
        if os.environ.get("GEM_SANDBOX_WARM", "1") == "0":
            return "disabled by GEM_SANDBOX_WARM=0"
        if not self.backend.isolated:
            return f"the {self.backend.name} backend has no isolation to keep a zygote in"
        return self._pool().broken

    def _pool(self) -> Pool:
        env = sandbox_env(WORKDIR, self.env, packages=bool(self.interpreter.packages))
        return pool_for(self.backend, self.interpreter, env, self.limits.tmp_size)

    def run_python(
        self,
        code: str,
        stdin: str | bytes = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
        args: Sequence[str] = (),
    ) -> SandboxResult:
        """Run ``code`` as ``main.py`` in the sandbox's working directory."""
        return run_sync(self.arun_python(code, stdin, files, limits, args))

    def run_command(
        self,
        argv: Sequence[str],
        stdin: str | bytes = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> SandboxResult:
        """Run ``argv`` (resolved on the sandbox's ``PATH``) with ``files`` in its working dir."""
        lim = limits or self.limits
        return execute(self._launch(argv, files, lim), _bytes(stdin), lim, self.backend.name)

    async def arun_python(
        self,
        code: str,
        stdin: str | bytes = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
        args: Sequence[str] = (),
    ) -> SandboxResult:
        """Async :meth:`run_python`: native async I/O, so many runs in flight take no thread each."""
        lim = limits or self.limits
        if self._cold_reason() is None:
            try:
                return await complete(self._warm(code, files, lim, args, interactive=False), _bytes(stdin))
            except WarmUnavailable:
                pass  # nothing of the run started: run it cold
        return await self.arun_command(self._python_argv(args), stdin, {**(files or {}), "main.py": code}, limits)

    async def arun_command(
        self,
        argv: Sequence[str],
        stdin: str | bytes = "",
        files: Mapping[str, str | bytes] | None = None,
        limits: Limits | None = None,
    ) -> SandboxResult:
        """Async :meth:`run_command`."""
        lim = limits or self.limits
        return await aexecute(self._launch(argv, files, lim), _bytes(stdin), lim, self.backend.name)

    @contextlib.asynccontextmanager
    async def open_python(
        self, code: str, files: Mapping[str, str | bytes] | None = None, limits: Limits | None = None,
        trusted_code: bool = False,
    ) -> AsyncIterator[Process]:  # fmt: skip
        """Start ``code`` as an interactive run: talk to it with ``send``/``readline``.

        ``trusted_code=True`` says that ``code`` is the caller's own script, never an
        agent's (e.g. a judge harness that reads the untrusted program from stdin): a warm
        zygote then compiles it once and forks every later run of it with the code
        object ready. It still runs inside the sandbox like any other run.

        On leaving the block the run is killed and reaped; ``process.result`` is then its
        :class:`SandboxResult` (stdout is the caller's, so the result's is empty).

        >>> async with Sandbox().open_python("print(input()[::-1])") as p:   # doctest: +SKIP
        ...     p.send(b"abc\\n"); line = await p.readline()
        """
        lim = limits or self.limits
        process: Process | None = None
        if self._cold_reason() is None:
            try:
                process = await begin(self._warm(code, files, lim, (), interactive=True, trusted=trusted_code))
            except WarmUnavailable:
                process = None
        if process is None:
            launch = self._launch(self._python_argv(()), {**(files or {}), "main.py": code}, lim)
            process = await start(launch, lim, self.backend.name, interactive=True)
        try:
            yield process
        finally:
            await process.finish()

    async def start_resident(self, code: str, limits: Limits | None = None) -> ResidentRun:
        """Start ``code``, the caller's own trusted script, as a resident run (:mod:`gem_tools.sandbox.resident`):
        forked once from a warm zygote and kept to serve request after request, with this sandbox's isolation
        and ``limits``' memory, process and file limits but no time limit of its own. Raises
        :class:`WarmUnavailable` where Python runs start cold (:meth:`path`)."""
        why = self._cold_reason()
        if why is not None:
            raise WarmUnavailable(why)
        lim = limits or self.limits
        if lim.tmp_size != self.limits.tmp_size:
            raise WarmUnavailable("a run's own tmp_size needs its own zygote")
        return await ResidentRun.start(self._pool(), code, lim)

    def _warm(self, code: str, files: Mapping[str, str | bytes] | None, limits: Limits, args: Sequence[str],
              interactive: bool, trusted: bool = False) -> WarmProcess:  # fmt: skip
        data = {_check_name(k): _bytes(v) for k, v in (files or {}).items()}
        data["main.py"] = _bytes(code)
        if limits.tmp_size != self.limits.tmp_size:
            raise WarmUnavailable("a run's own tmp_size needs its own zygote")
        return WarmProcess(self._pool(), ["main.py", *args], data, limits, self.backend.name, interactive, trusted)

    def _python_argv(self, args: Sequence[str]) -> list[str]:
        return [self.interpreter.executable, "-s", "main.py", *args]

    def _launch(self, argv: Sequence[str], files: Mapping[str, str | bytes] | None, limits: Limits) -> Launch:
        if not argv:
            raise ValueError("run_command needs a non-empty argv")
        data = {_check_name(k): _bytes(v) for k, v in (files or {}).items()}
        env = sandbox_env(WORKDIR, self.env, packages=bool(self.interpreter.packages))
        return self.backend.launch(Job(list(argv), data, env, limits, self.interpreter))


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
    "ResidentRun",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailableError",
    "Status",
    "UnknownPackageError",
    "available_backends",
    "cgroups",
    "default_sandbox",
    "resolve_backend",
    "run_python",
]
