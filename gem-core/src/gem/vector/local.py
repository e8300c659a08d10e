"""Backends whose envs live in the caller's process: ``sync`` and ``thread``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Any

from gem.core import Env
from gem.executor import ThreadPool
from gem.host.calls import Call, run_call
from gem.host.deadlines import Deadlines
from gem.host.failures import Failure, timed_out
from gem.host.slot import Slot
from gem.vector.base import VectorEnv


class SyncVectorEnv(VectorEnv):
    """Steps the envs one after another in the caller's thread.

    With ``step_timeout`` the calls run one after another in a helper thread instead,
    so that the caller can stop waiting for one that hangs (a thread cannot be killed:
    the hung call goes on in the background, its env is dropped and a fresh one takes
    its place)."""

    backend = "sync"

    def __init__(self, env_fns: Sequence[Callable[[], Env]], pool: ThreadPool | None = None, **kwargs: Any) -> None:
        super().__init__(env_fns, **kwargs)
        self.slots = [
            Slot(i, fn, self.env_ids[i], self.autoreset_mode, self.on_error) for i, fn in enumerate(env_fns)
        ]
        #: the threads that run the calls under step_timeout: the caller's ``pool`` (shared, kept open), or
        #: one of this vector env's own, closed with it
        self._pool: ThreadPool | None = pool
        self._own_pool = pool is None

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
        deadlines = Deadlines(self.step_timeout)  # a call's clock starts when a thread takes it, not while it queues

        def timed(slot: Slot, call: Call) -> Any:
            deadlines.start(call[0])
            return run_call(slot, call)

        waiting = {self._pool.submit(timed, self.slots[c[0]], c): c for c in calls}
        results: dict[int, Any] = {}
        while waiting:
            done, _ = wait(waiting, timeout=deadlines.wait(idle=0.05), return_when=FIRST_COMPLETED)
            for future in done:
                index = waiting.pop(future)[0]
                deadlines.stop(index)
                results[index] = future.result()
            for future, call in list(waiting.items()):
                if deadlines.overdue(call[0]):
                    del waiting[future]
                    deadlines.stop(call[0])
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
        failure = timed_out(index, old.env_id, call[1], self.step_timeout,
                            "its thread was abandoned and the env replaced by a fresh one")
        return self.recovery.failed(index, call, failure)

    def _close(self) -> None:
        if self._pool is not None and self._own_pool:
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
