"""Backends whose envs live in the caller's process: ``sync`` and ``thread``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gem.core import Env
from gem.vector.base import Call, VectorEnv
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
        raise ValueError(f"unknown vector call {method!r}")
    except Exception as exc:
        return Failure.from_exc(slot.index, slot.env_id, exc)


class SyncVectorEnv(VectorEnv):
    """Steps the envs one after another in the caller's thread."""

    backend = "sync"

    def __init__(self, env_fns: Sequence[Callable[[], Env]], **kwargs: Any) -> None:
        super().__init__(env_fns, **kwargs)
        self.slots = [
            Slot(i, fn, self.env_ids[i], self.autoreset_mode, self.on_error) for i, fn in enumerate(env_fns)
        ]

    @property
    def envs(self) -> list[Env]:
        """The sub-envs themselves (the reference package exposes them too)."""
        return [s.env for s in self.slots]

    def _execute(self, calls: Sequence[Call]) -> list[Any]:
        return [run_call(self.slots[c[0]], c) for c in calls]

    def _close(self) -> None:
        for slot in self.slots:
            slot.env.close()


class ThreadVectorEnv(SyncVectorEnv):
    """Steps the envs concurrently in a thread pool (for I/O-bound envs: tools, APIs)."""

    backend = "thread"

    def __init__(
        self, env_fns: Sequence[Callable[[], Env]], max_workers: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(env_fns, **kwargs)
        self._pool = ThreadPoolExecutor(max_workers=max_workers or min(64, len(env_fns)),
                                        thread_name_prefix="gem-vector")

    def _execute(self, calls: Sequence[Call]) -> list[Any]:
        if len(calls) == 1:
            return [run_call(self.slots[calls[0][0]], calls[0])]
        futures = [self._pool.submit(run_call, self.slots[c[0]], c) for c in calls]
        return [f.result() for f in futures]

    def _close(self) -> None:
        self._pool.shutdown(wait=True)
        super()._close()
