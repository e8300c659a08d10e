"""Resource limits of one sandboxed run."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """What one run may use. Every limit applies to each run separately.

    >>> Limits(timeout=2.0, memory=256 * MiB).cpu_time
    2
    >>> Limits(memory=256 * MiB).run_memory == 256 * MiB
    True

    ``memory`` is the address-space limit of each process (``RLIMIT_AS``) and
    ``run_memory`` the memory of the whole run, all its processes and its ``/tmp``
    together (a cgroup's ``memory.max``; default: ``memory``); ``processes`` caps the
    processes and threads the run may hold at once (``RLIMIT_NPROC`` of the run's uid, and
    the cgroup's ``pids.max``). Where no cgroup can be made (see
    :func:`gem_tools.sandbox.cgroups.support`) only the per-process limits apply.
    ``output`` caps what is kept of stdout and of stderr (the rest is dropped and the
    result says so), and a run that writes more than ``output_kill`` bytes in all is
    stopped.
    """

    #: wall-clock seconds before the run is killed
    timeout: float = 10.0
    #: CPU seconds (``RLIMIT_CPU``); ``None`` means ``ceil(timeout)``
    cpu_time: int | None = None
    #: bytes of address space per process (``RLIMIT_AS``)
    memory: int = 1024 * MiB
    #: bytes of memory for the whole run (cgroup ``memory.max``); ``None`` means ``memory``
    run_memory: int | None = None
    #: largest file the run may write, in bytes (``RLIMIT_FSIZE``)
    file_size: int = 16 * MiB
    #: open files per process (``RLIMIT_NOFILE``)
    open_files: int = 64
    #: processes and threads at once (``RLIMIT_NPROC`` of the sandbox uid)
    processes: int = 32
    #: bytes kept of stdout and of stderr each
    output: int = 64 * 1024
    #: bytes written to stdout + stderr after which the run is stopped
    output_kill: int = 8 * MiB
    #: size of the private writable temp dir (tmpfs backends), in bytes
    tmp_size: int = 64 * MiB

    def __post_init__(self) -> None:
        if self.cpu_time is None:
            object.__setattr__(self, "cpu_time", max(1, int(-(-self.timeout // 1))))
        if self.run_memory is None:
            object.__setattr__(self, "run_memory", self.memory)
        for name in ("timeout", "memory", "run_memory", "file_size", "open_files", "processes", "output", "tmp_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be positive, got {getattr(self, name)!r}")
        if self.output_kill < self.output:
            raise ValueError("Limits.output_kill must be at least Limits.output")

    def with_(self, **changes: Any) -> Limits:
        """A copy with some limits changed; ``cpu_time`` follows a new ``timeout``, and
        ``run_memory`` a new ``memory`` when it was following it, unless given."""
        if "timeout" in changes and "cpu_time" not in changes:
            changes["cpu_time"] = None
        if "memory" in changes and "run_memory" not in changes and self.run_memory == self.memory:
            changes["run_memory"] = None
        return replace(self, **changes)


#: rlimits of a long-lived process of ours in the sandbox (a warm zygote, a helper): only
#: ceilings for the processes it forks, which lower them for their own work
CEILINGS = dict(cpu_time=1 << 30, memory=1 << 44, file_size=1 << 44, open_files=1024, processes=1 << 16)
