"""The ``process`` backend: envs live in worker processes (for CPU-bound envs).

Envs are spread over ``num_workers`` processes (default: one per CPU, at most one per
env), started with ``fork`` while the caller has one thread, else ``forkserver``
(``backend_kwargs={"context": ...}`` chooses). A worker answers each call as soon as
it is done, so when it dies (or hangs past ``step_timeout`` and is killed) only the
call it was running fails; calls it answered before keep their real results. It is
restarted with fresh envs. A worker holding several envs sends, now and then, an env's
:meth:`~gem.host.slot.Slot.snapshot` with its answer (when
:meth:`~gem.host.slot.Slot.checkpoint` says one is due), and the caller keeps the calls
answered since; so its other envs go on in the fresh worker from their last snapshots,
the calls since replayed, as if nothing had happened (the calls of theirs that it never
ran, run there). ``backend_kwargs={"restore_siblings": False}`` turns that off. Only an
env without a state (``get_state`` not implemented), or whose replay answers otherwise
than before (it is not deterministic given its state and action), or any env with it
off, lost its episode; it says so on its next call (raised, or with ``on_error="reset"``
as a truncated step with reward NaN and ``info["episode_lost"]``, never as an ordinary
episode end). The workers are the host's (:class:`gem.host.worker.Worker`, running their
calls one at a time in their main thread), restarted by its one rerun
(:meth:`gem.host.recovery.Recovery.rerun`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any

from gem.core import Env
from gem.host.calls import Call
from gem.host.deadlines import collect
from gem.host.worker import SlotArgs, Worker, default_start_method
from gem.vector.base import VectorEnv

__all__ = ["ProcessVectorEnv", "SlotArgs", "default_start_method"]


def _poll(workers: list[Worker], timeout: float | None) -> dict[Worker, tuple[list[Any], str | None]]:
    """:func:`~gem.host.deadlines.collect`'s poll for worker processes: their sockets and, for a
    death that leaves the socket open (a child of the env holding it), their process sentinels."""
    ready = set(wait([w.conn for w in workers] + [w.process.sentinel for w in workers], timeout))
    news = {}
    for worker in workers:
        if worker.conn in ready or worker.process.sentinel in ready:
            exited = worker.process.sentinel in ready
            answers, open_ = worker.answers(drain=exited)  # a dead worker's last answers first
            news[worker] = ([a for _, a in answers], worker.died() if exited or not open_ else None)
    return news


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
        self._workers: list[Worker] = []
        self._owner: dict[int, Worker] = {}
        try:
            for chunk in chunks:
                args = [(i, env_fns[i], self.env_ids[i], self.autoreset_mode.value, self.on_error) for i in chunk]
                self._start(Worker(args, self._method, snapshots=restore_siblings, name="gem-vector"))
        except BaseException:
            self._close()
            raise

    def _start_method(self) -> str:
        return self._context if self._context is not None else default_start_method()

    def _start(self, worker: Worker) -> Worker:
        self._workers.append(worker)
        self._owner.update((i, worker) for i in worker.indices)
        return worker.start()

    def _execute(self, calls: Sequence[Call]) -> list[Any]:
        results: dict[int, Any] = {}
        by_worker: dict[int, list[Call]] = {}
        for call in calls:
            index = call[0]
            if index in self.recovery.lost:
                results[index] = self.recovery.after_loss(index, call)
            else:
                by_worker.setdefault(id(self._owner[index]), []).append(call)
        waiting: dict[Worker, list[Call]] = {}  # calls not yet answered, in the order the worker runs them
        for worker in list(self._workers):
            batch = by_worker.get(id(worker))
            if batch:
                worker.send([(c[0], c) for c in batch])  # a dead worker is found by the poll
                waiting[worker] = list(batch)

        def answered(call: Call, answer: Any) -> None:
            results[call[0]] = self.recovery.answered(call, answer)

        collect(waiting, _poll, self.step_timeout, answered,  # type: ignore[arg-type]
                lambda worker, owed, died: self._lose_worker(worker, owed, results, died))
        return [results[c[0]] for c in calls]

    def _lose_worker(self, worker: Worker, pending: list[Call], results: dict[int, Any], died: str | None) -> None:
        """A worker died (``died``) or hung (``None``) while running ``pending[0]`` (it runs its
        calls in order): a fresh one takes its place; that call fails, the worker's other envs
        go on in the fresh one and its later calls run there
        (:meth:`~gem.host.recovery.Recovery.rerun`)."""
        worker.kill()
        execute = self.recovery.one_at_a_time(lambda call: worker.execute(call, self.step_timeout))
        results.update(self.recovery.rerun(worker.indices, worker.start, execute,
                                           (pending[0][0], pending[0]), [(c[0], c) for c in pending[1:]], died))

    def _close(self) -> None:
        workers, self._workers = getattr(self, "_workers", []), []
        for worker in workers:
            worker.ask_to_close()
        for worker in workers:
            worker.stop()
