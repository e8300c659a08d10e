"""The ``process`` backend: envs live in worker processes (for CPU-bound envs).

Envs are spread over ``num_workers`` processes (default: one per CPU, at most one per
env), started with ``fork`` while the caller has one thread, else ``forkserver``
(``backend_kwargs={"context": ...}`` chooses). A worker that dies is restarted with
fresh envs; the envs it held report the death on their next call (raised, or in
``info`` with ``on_error="reset"``).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from gem.core import Env
from gem.vector.base import Call, VectorEnv
from gem.vector.local import run_call
from gem.vector.slot import AutoresetMode, Failure, Slot

SlotArgs = tuple[int, Callable[[], Env], str | None, str, str]


def _worker(conn: Connection, slot_args: list[SlotArgs]) -> None:
    slots: dict[int, Slot] = {}
    try:
        for index, fn, env_id, mode, on_error in slot_args:
            try:
                slots[index] = Slot(index, fn, env_id, AutoresetMode(mode), on_error)
            except Exception as exc:
                conn.send(("init_error", Failure.from_exc(index, env_id, exc)))
                return
        conn.send(("ready", None))
        while True:
            message, payload = conn.recv()
            if message == "close":
                for slot in slots.values():
                    slot.env.close()
                conn.send(("closed", None))
                return
            conn.send(("results", [run_call(slots[c[0]], c) for c in payload]))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass


class _Worker:
    def __init__(self, ctx: Any, slot_args: list[SlotArgs]) -> None:
        self.slot_args = slot_args
        self.indices = [a[0] for a in slot_args]
        parent, child = ctx.Pipe()
        self.conn = parent
        self.process = ctx.Process(target=_worker, args=(child, slot_args), daemon=True,
                                   name=f"gem-vector-{self.indices[0]}")
        self.process.start()
        child.close()

    def recv(self) -> tuple[str, Any]:
        """Wait for the worker's answer; ``("died", exitcode)`` if it dies meanwhile."""
        while True:
            try:
                if self.conn.poll(0.5):
                    return self.conn.recv()
            except (EOFError, ConnectionResetError, BrokenPipeError):
                pass
            if not self.process.is_alive():
                try:  # it may have answered just before exiting
                    if self.conn.poll(0):
                        return self.conn.recv()
                except (EOFError, ConnectionResetError, BrokenPipeError, OSError):
                    pass
                return ("died", self.process.exitcode)

    def stop(self) -> None:
        try:
            self.conn.send(("close", None))
            if self.conn.poll(5):
                self.conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class ProcessVectorEnv(VectorEnv):
    """Envs in worker processes; calls to different workers run in parallel."""

    backend = "process"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int | None = None,
        context: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(env_fns, **kwargs)
        self._context = context
        workers = max(1, min(num_workers or os.cpu_count() or 1, self.num_envs))
        chunks = [list(range(self.num_envs))[w::workers] for w in range(workers)]
        self._workers: list[_Worker] = []
        self._owner: dict[int, _Worker] = {}
        try:
            for chunk in chunks:
                args = [(i, env_fns[i], self.env_ids[i], self.autoreset_mode.value, self.on_error) for i in chunk]
                self._start(args)
        except BaseException:
            self._close()
            raise

    def _start_method(self) -> str:
        """``fork`` while this process has a single thread: it needs no ``__main__`` guard
        and works with envs defined in a notebook or script. With other threads alive
        (an inference engine, thread pools) forking is unsafe, so ``forkserver``."""
        if self._context is not None:
            return self._context
        return "fork" if threading.active_count() == 1 and os.name == "posix" else "forkserver"

    def _start(self, slot_args: list[SlotArgs]) -> _Worker:
        method = self._start_method()
        worker = _Worker(mp.get_context(method), slot_args)
        kind, payload = worker.recv()
        if kind != "ready":
            worker.stop()
            if isinstance(payload, Failure):
                from gem.errors import VectorEnvError

                raise VectorEnvError(
                    f"{payload.describe()} while being created in a worker process\n{payload.traceback}",
                    payload.index,
                    payload.env_id,
                )
            hint = ""
            if method != "fork":
                hint = (f" With the {method!r} start method, worker processes re-run your script's top level: "
                        "put the code that makes process-backend envs under `if __name__ == '__main__':`.")
            raise RuntimeError(
                f"vector worker for envs {worker.indices} exited with code {payload} while starting.{hint}"
            )
        self._workers = [w for w in self._workers if w.indices != worker.indices] + [worker]
        for i in worker.indices:
            self._owner[i] = worker
        return worker

    def _execute(self, calls: Sequence[Call]) -> list[Any]:
        results: dict[int, Any] = {}
        pending: dict[int, Call] = {}
        for call in calls:
            index = call[0]
            if index in self._lost:
                results[index] = self._after_loss(index, call)
            else:
                pending[index] = call
        by_worker: dict[int, list[Call]] = {}
        for index, call in pending.items():
            by_worker.setdefault(id(self._owner[index]), []).append(call)
        sent = []
        for worker in list(self._workers):
            batch = by_worker.get(id(worker))
            if batch:
                try:
                    worker.conn.send(("exec", batch))
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass  # found dead in recv below
                sent.append((worker, batch))
        for worker, batch in sent:
            kind, payload = worker.recv()
            if kind == "results":
                for call, result in zip(batch, payload):
                    results[call[0]] = result
                continue
            reason = f"its worker process died (exit code {payload}) and was restarted with a fresh env"
            self._start(worker.slot_args)
            for i in worker.indices:
                self._lost[i] = reason
            for call in batch:
                results[call[0]] = self._after_loss(call[0], call)
        return [results[c[0]] for c in calls]

    def _close(self) -> None:
        for worker in getattr(self, "_workers", []):
            worker.stop()
        self._workers = []
