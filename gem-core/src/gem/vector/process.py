"""The ``process`` backend: envs live in worker processes (for CPU-bound envs).

Envs are spread over ``num_workers`` processes (default: one per CPU, at most one per
env), started with ``fork`` while the caller has one thread, else ``forkserver``
(``backend_kwargs={"context": ...}`` chooses). A worker answers each call as soon as
it is done, so when it dies (or hangs past ``step_timeout`` and is killed) only the
call it was running fails; calls it answered before keep their real results. It is
restarted with fresh envs. A worker holding several envs sends, now and then, an env's
:meth:`~gem.vector.slot.Slot.snapshot` with its answer (when
:meth:`~gem.vector.slot.Slot.checkpoint` says one is due), and the caller keeps the calls
answered since; so its other envs go on in the fresh worker from their last snapshots,
the calls since replayed, as if nothing had happened (the calls of theirs that it never
ran, run there). ``backend_kwargs={"restore_siblings": False}`` turns that off. Only an
env without a state (``get_state`` not implemented), or whose replay answers otherwise
than before (it is not deterministic given its state and action), or any env with it
off, lost its episode; it says so on its next call (raised, or with ``on_error="reset"``
as a truncated step with reward NaN and ``info["episode_lost"]``, never as an ordinary
episode end).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from gem.core import Env
from gem.errors import VectorEnvError
from gem.host.calls import Call, run_remote
from gem.host.deadlines import Deadlines
from gem.host.failures import Failure
from gem.vector.base import VectorEnv
from gem.vector.slot import AutoresetMode, Slot

SlotArgs = tuple[int, Callable[[], Env], str | None, str, str]


def default_start_method() -> str:
    """``fork`` while this process has a single thread: it needs no ``__main__`` guard
    and works with envs defined in a notebook or script. With other threads alive
    (an inference engine, thread pools) forking is unsafe, so ``forkserver``."""
    return "fork" if threading.active_count() == 1 and os.name == "posix" else "forkserver"


def _poll(conn: Connection) -> bool:
    try:
        return conn.poll(0)
    except (EOFError, ConnectionResetError, BrokenPipeError, OSError):
        return False


def _recv(conn: Connection) -> tuple[str, Any] | None:
    try:
        return conn.recv()
    except (EOFError, ConnectionResetError, BrokenPipeError, OSError):
        return None


def _worker(conn: Connection, slot_args: list[SlotArgs], restore_siblings: bool) -> None:
    slots: dict[int, Slot] = {}
    try:
        for index, fn, env_id, mode, on_error in slot_args:
            try:
                slots[index] = Slot(index, fn, env_id, AutoresetMode(mode), on_error)
            except Exception as exc:
                conn.send(("init_error", Failure.from_exc(index, env_id, exc)))
                return
        conn.send(("ready", None))
        snapshot = restore_siblings and len(slots) > 1  # a lone env has no sibling whose death it outlives
        while True:
            message, payload = conn.recv()
            if message == "close":
                for slot in slots.values():
                    slot.env.close()
                conn.send(("closed", None))
                return
            for call in payload:  # one message per call: a death or a hang costs only the calls not yet answered
                conn.send(("result", run_remote(slots[call[0]], call, snapshot)))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass


class _Worker:
    def __init__(self, ctx: Any, slot_args: list[SlotArgs], restore_siblings: bool) -> None:
        self.slot_args = slot_args
        self.indices = [a[0] for a in slot_args]
        parent, child = ctx.Pipe()
        self.conn = parent
        self.process = ctx.Process(target=_worker, args=(child, slot_args, restore_siblings), daemon=True,
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
    """Envs in worker processes; calls to different workers run in parallel.

    ``restore_siblings=False``: workers take no snapshots, and the other envs of a worker that
    dies lose their episodes (see the module's docstring)."""

    backend = "process"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        num_workers: int | None = None,
        context: str | None = None,
        restore_siblings: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(env_fns, **kwargs)
        self._context = context
        self._restore_siblings = restore_siblings
        # chosen once: a restarted worker must rebuild its envs the way the first one did (a
        # factory that only fork can carry, a registry filled in this process)
        self._method = self._start_method()
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
        return self._context if self._context is not None else default_start_method()

    def _start(self, slot_args: list[SlotArgs]) -> _Worker:
        method = self._method
        worker = _Worker(mp.get_context(method), slot_args, self._restore_siblings)
        kind, payload = worker.recv()
        if kind != "ready":
            worker.stop()
            if isinstance(payload, Failure):
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
        by_worker: dict[int, list[Call]] = {}
        for call in calls:
            index = call[0]
            if index in self.recovery.lost:
                results[index] = self.recovery.after_loss(index, call)
            else:
                by_worker.setdefault(id(self._owner[index]), []).append(call)
        waiting: dict[_Worker, list[Call]] = {}  # calls not yet answered, in the order the worker runs them
        for worker in list(self._workers):
            batch = by_worker.get(id(worker))
            if batch:
                try:
                    worker.conn.send(("exec", batch))
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass  # found dead below
                waiting[worker] = list(batch)
        deadlines = Deadlines(self.step_timeout)  # per worker: each call it runs gets step_timeout of its own
        for worker in waiting:
            deadlines.start(worker)
        while waiting:
            ready = set(wait([w.conn for w in waiting] + [w.process.sentinel for w in waiting], deadlines.wait()))
            for worker in list(waiting):
                pending = waiting[worker]
                if worker.conn in ready or worker.process.sentinel in ready:
                    while pending and _poll(worker.conn):
                        answer = _recv(worker.conn)
                        if answer is None:
                            break
                        call = pending.pop(0)
                        results[call[0]] = self.recovery.answered(call, answer[1])
                        deadlines.start(worker)
                    if pending and not worker.process.is_alive():
                        worker.process.join()
                        reason = f"its worker process died (exit code {worker.process.exitcode})"
                        self._lose_worker(worker, pending, results, reason)
                        pending.clear()
                    if not pending:
                        del waiting[worker]
                        deadlines.stop(worker)
                        continue
                if deadlines.overdue(worker):
                    worker.process.kill()
                    worker.process.join()
                    self._lose_worker(worker, pending, results, None)
                    del waiting[worker]
                    deadlines.stop(worker)
        return [results[c[0]] for c in calls]

    def _lose_worker(self, worker: _Worker, pending: list[Call], results: dict[int, Any], reason: str | None) -> None:
        """A worker died (``reason``) or hung (``None``) while running ``pending[0]``: start a
        fresh one; that call fails, the worker's other envs go on in the fresh one
        (:meth:`~gem.host.recovery.Recovery.worker_lost`)."""
        worker.conn.close()
        self._start(worker.slot_args)
        results.update(self.recovery.worker_lost(worker.indices, pending, reason))

    def _close(self) -> None:
        for worker in getattr(self, "_workers", []):
            worker.stop()
        self._workers = []
