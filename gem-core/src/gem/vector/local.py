"""Backends whose envs live in the caller's process: ``sync`` and ``thread``."""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any

from gem.core import Env
from gem.executor import ThreadPool
from gem.vector.base import Call, Replayed, VectorEnv
from gem.vector.slot import Failure, Slot


def run_call(slot: Slot, call: Call) -> Any:
    """Execute one call on a slot; an exception becomes a :class:`Failure`."""
    _, method, args, kwargs = call
    try:
        if method == "reset":
            seed, reset_kwargs = args
            return slot.reset(seed, reset_kwargs)
        if method == "step":
            return slot.step(args[0])
        if method == "call":
            return slot.call(*args)
        if method == "restore":
            return restore(slot, *args)
        raise ValueError(f"unknown vector call {method!r}")
    except Exception as exc:
        return Failure.from_exc(slot.index, slot.env_id, exc)


def run_remote(slot: Slot, call: Call, snapshot: bool) -> tuple[Any, bytes | None]:
    """:func:`run_call` in a worker process or actor: the answer, and with ``snapshot`` (the
    worker holds other envs: if a call of one of them kills the worker, this env goes on in a
    fresh one) what :meth:`~gem.vector.slot.Slot.checkpoint` says after the call; the caller
    keeps it (:meth:`~gem.vector.base.VectorEnv._answered`) and reads it only after a death."""
    if not snapshot:
        return run_call(slot, call), None
    start = time.perf_counter()
    answer = run_call(slot, call)
    args = call[2]
    return answer, slot.checkpoint(args[0] if args else None, answer, time.perf_counter() - start)


class ReplayDiverged(RuntimeError):
    """A call replayed after a restore answered otherwise than it did before the worker died."""


def restore(slot: Slot, snapshot: bytes, replay: Sequence[Replayed] = ()) -> None:
    """Put a fresh slot where a dead worker's was: its last snapshot, then the calls answered
    since (``replay``), whose steps must answer the same observation and reward as before, and
    whose resets the same observation."""
    slot.restore(pickle.loads(snapshot))
    for n, (method, args, obs, reward) in enumerate(replay, 1):
        answer = run_call(slot, (slot.index, method, args, {}))
        failed = isinstance(answer, Failure)
        if method == "step":
            expected, got = (obs, reward), answer if failed else (answer[0], answer[1])
        elif method == "reset":
            expected, got = obs, answer if failed else answer[0]
        else:  # other calls' results need not compare, but they answered before
            expected = "an answer"
            got = answer if failed else expected
        if not _same(got, expected):
            raise ReplayDiverged(
                f"replaying its {method} {n} of {len(replay)} since its last snapshot answered "
                f"{_short(got)}, not {_short(expected)} as before: the env is not deterministic "
                "given its get_state() and the action"
            )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN rewards
    try:
        return bool(a == b)
    except Exception:  # arrays and the like: compare their bytes
        return pickle.dumps(a) == pickle.dumps(b)


def _short(value: Any) -> str:
    text = value.describe() if isinstance(value, Failure) else repr(value)
    return text if len(text) <= 120 else f"{text[:117]}..."


class SyncVectorEnv(VectorEnv):
    """Steps the envs one after another in the caller's thread.

    With ``step_timeout`` the calls run one after another in a helper thread instead,
    so that the caller can stop waiting for one that hangs (a thread cannot be killed:
    the hung call goes on in the background, its env is dropped and a fresh one takes
    its place)."""

    backend = "sync"

    def __init__(self, env_fns: Sequence[Callable[[], Env]], **kwargs: Any) -> None:
        super().__init__(env_fns, **kwargs)
        self.slots = [
            Slot(i, fn, self.env_ids[i], self.autoreset_mode, self.on_error) for i, fn in enumerate(env_fns)
        ]
        self._pool: ThreadPool | None = None

    @property
    def envs(self) -> list[Env]:
        """The sub-envs themselves (the reference package exposes them too)."""
        return [s.env for s in self.slots]

    def _threads(self) -> int:
        return 1

    def _execute(self, calls: Sequence[Call]) -> list[Any]:
        if self.step_timeout is None and (self._threads() == 1 or len(calls) == 1):
            return [run_call(self.slots[c[0]], c) for c in calls]
        if self._pool is None:
            self._pool = ThreadPool(self._threads(), name=f"gem-vector-{self.backend}")
        if self.step_timeout is None:
            futures = [self._pool.submit(run_call, self.slots[c[0]], c) for c in calls]
            return [f.result() for f in futures]
        started: dict[int, float] = {}  # a call's clock starts when a thread takes it, not while it queues

        def timed(slot: Slot, call: Call) -> Any:
            started[call[0]] = time.monotonic()
            return run_call(slot, call)

        waiting = {self._pool.submit(timed, self.slots[c[0]], c): c for c in calls}
        results: dict[int, Any] = {}
        while waiting:
            running = [started[c[0]] for c in waiting.values() if c[0] in started]
            timeout = max(0.0, min(running) + self.step_timeout - time.monotonic()) if running else 0.05
            done, _ = wait(waiting, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in done:
                results[waiting.pop(future)[0]] = future.result()
            now = time.monotonic()
            for future, call in list(waiting.items()):
                if call[0] in started and now - started[call[0]] >= self.step_timeout:
                    del waiting[future]
                    results[call[0]] = self._hung(call)
        return [results[c[0]] for c in calls]

    def _hung(self, call: Call) -> Any:
        """A call that overran ``step_timeout``: its thread is abandoned (it runs on until the
        call returns, if ever), and a fresh env takes the slot."""
        index = call[0]
        self._pool.abandon()
        old = self.slots[index]
        try:
            self.slots[index] = Slot(index, old.env_fn, old.env_id, self.autoreset_mode, self.on_error)
            self.slots[index].needs_reset = True
        except Exception as exc:
            return Failure.from_exc(index, old.env_id, exc)
        failure = self._timed_out(index, call, "its thread was abandoned and the env replaced by a fresh one")
        return self._failed(index, call, failure)

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        for slot in self.slots:
            slot.env.close()


class ThreadVectorEnv(SyncVectorEnv):
    """Steps the envs concurrently in a thread pool (for I/O-bound envs: tools, APIs).

    ``max_workers`` threads (default: one per env, at most 64). A call that overruns
    ``step_timeout`` is given up on as in :class:`SyncVectorEnv`, without holding back
    the other envs of the batch."""

    backend = "thread"

    def __init__(
        self, env_fns: Sequence[Callable[[], Env]], max_workers: int | None = None, **kwargs: Any
    ) -> None:
        self._max_workers = max_workers or min(64, len(env_fns))
        super().__init__(env_fns, **kwargs)

    def _threads(self) -> int:
        return self._max_workers
