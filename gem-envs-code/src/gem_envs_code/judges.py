"""Resident judges: the trusted side of function tests, kept from one test to the next.

A function test needs two sandboxed processes (see :mod:`gem_envs_code.harness`): the
program, which runs the agent's code and is always a fresh warm fork, and the judge, which
runs only trusted code (ours and the dataset's tests). The judge is kept: after its verdict
it waits for the next test, each run in a fresh namespace, so a test costs one fork, not two.

A judge is given back only after a clean verdict: one the judge says left nothing behind
(``keep``: no module imported because the program named it), with nothing left unsent to it
and at most :data:`~gem_tools.sandbox.resident.STDERR_KEPT` bytes on its stderr. A test that
ended any other way (a timeout, the program gone mid-test, a line over the limit, the judge
dead, a cancelled episode) kills its judge, and the next test starts a fresh one. Judges are
kept per sandbox configuration and test limits, at most :data:`MAX_IDLE` idle each; where
Python runs start cold (:meth:`~gem_tools.sandbox.Sandbox.path`) each test starts its judge
as before.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from gem_tools.sandbox import Limits, ResidentRun, Sandbox
from gem_tools.sandbox.warm import WarmUnavailable, ZygoteLost

#: idle judges kept per configuration
MAX_IDLE = 64

_IDLE: dict[tuple[Any, ...], list[ResidentRun]] = {}
_LOCK = threading.Lock()


def _key(sandbox: Sandbox, limits: Limits) -> tuple[Any, ...]:
    # the zygote pool (backend, interpreter, packages, environment) and the limits a judge is forked with
    return (id(sandbox._pool()), limits.with_(timeout=1.0, cpu_time=1))


async def acquire(sandbox: Sandbox, limits: Limits, script: str) -> ResidentRun | None:
    """An idle judge for this sandbox and these limits, or a new one running ``script``; None where the
    sandbox starts its Python runs cold (the caller then starts a judge of its own for the test)."""
    if sandbox.path()[0] == "cold":
        return None
    key = _key(sandbox, limits)
    while True:
        with _LOCK:
            idle = _IDLE.get(key)
            judge = idle.pop() if idle else None
        if judge is None:
            break
        if judge.alive():
            return judge
        await judge.kill()
    try:
        return await sandbox.start_resident(script, limits)
    except (WarmUnavailable, ZygoteLost):
        return None


async def release(sandbox: Sandbox, limits: Limits, judge: ResidentRun, clean: bool) -> None:
    """Keep ``judge`` for the next test if the test ended ``clean`` and the judge can be kept, else kill it."""
    if clean and judge.alive() and not judge.pending and judge.clear_stderr():
        key = _key(sandbox, limits)
        with _LOCK:
            idle = _IDLE.setdefault(key, [])
            if len(idle) < MAX_IDLE:
                idle.append(judge)
                return
    await judge.kill()


def idle_count() -> int:
    """Idle judges kept in this process (all configurations)."""
    with _LOCK:
        return sum(len(v) for v in _IDLE.values())


def close() -> None:
    """End every idle judge of this process."""
    with _LOCK:
        judges = [j for idle in _IDLE.values() for j in idle]
        _IDLE.clear()
    for judge in judges:
        judge.destroy()


def _forget() -> None:
    # a forked copy of this process must not use (nor kill) its parent's judges
    global _LOCK
    for idle in _IDLE.values():
        for judge in idle:
            judge.destroy()  # in a child: closes its copies of the fds, leaves the parent's zygote alone
    _IDLE.clear()
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget)
atexit.register(close)
