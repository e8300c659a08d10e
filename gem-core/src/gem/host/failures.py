"""What a failed env call reports, on every backend."""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

#: a call did not return within its step timeout (its thread was abandoned, or its worker killed)
STEP_TIMEOUT = "StepTimeout"
#: the worker process or Ray actor running a call died; it was restarted with fresh envs
WORKER_DIED = "WorkerDied"
#: an env lost its episode with a sibling's worker and had no state to go on from
EPISODE_LOST = "EpisodeLost"


@dataclass
class Failure:
    """An exception raised inside a sub-env, in a form that crosses processes."""

    index: int
    env_id: str | None
    type: str
    message: str
    traceback: str

    @classmethod
    def from_exc(cls, index: int, env_id: str | None, exc: BaseException) -> Failure:
        return cls(index, env_id, type(exc).__name__, str(exc), "".join(traceback.format_exception(exc)))

    def describe(self) -> str:
        return f"env {self.index} ({self.env_id}) raised {self.type}: {self.message}"


def overran(method: str, seconds: float | None) -> str:
    """What a ``method`` call that overran its step timeout of ``seconds`` did."""
    return f"{method} did not return within {seconds} s"


def timed_out(index: int, env_id: str | None, method: str, seconds: float | None, then: str) -> Failure:
    """A ``method`` call that overran ``seconds``; ``then`` says what became of its env."""
    return Failure(index, env_id, STEP_TIMEOUT, f"{overran(method, seconds)}; {then}", "")


def worker_died(index: int, env_id: str | None, why: str) -> Failure:
    """A call whose worker died (``why``) and was restarted with a fresh env."""
    return Failure(index, env_id, WORKER_DIED, why, "")


def episode_lost(index: int, env_id: str | None, why: str) -> Failure:
    """An env that lost its episode (``why``) through no fault of its own."""
    return Failure(index, env_id, EPISODE_LOST, why, "")


def failure_info(failure: Failure, info: dict[str, Any]) -> dict[str, Any]:
    """The ``info`` of a step that failed and started a fresh episode (``on_error="reset"``)."""
    return {**info, "error": failure.describe(), "error_type": failure.type, "final_obs": None, "final_info": {}}
