"""What a sandboxed run reports."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Status(str, enum.Enum):
    """How a run ended."""

    OK = "ok"  # exit code 0
    ERROR = "error"  # non-zero exit code
    TIMEOUT = "timeout"  # wall-clock limit; the sandbox killed the run
    KILLED = "killed"  # died of a signal that no limit explains
    LIMIT = "limit"  # hit a resource limit; ``SandboxResult.limit`` says which


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one run.

    ``exit_code`` is the process's exit status, or ``-signal`` when a signal ended it,
    or ``None`` when the sandbox stopped it (timeout, output limit).
    """

    status: Status
    exit_code: int | None
    stdout: str
    stderr: str
    duration: float
    backend: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    #: "cpu", "memory", "output" or "file_size" when ``status`` is LIMIT
    limit: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated
