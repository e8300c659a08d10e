"""The envs of a run with ``processes=N`` (:func:`gem.runner.run_episodes`,
:func:`gem.multiagent.run_multiagent_episodes`): ``slots`` envs spread over N of the host's
worker processes (:class:`~gem.host.worker.Worker`), each running the calls it is sent side
by side and answering each the moment it returns, so envs whose steps block overlap inside a
worker as they do in a run's own threads, CPU-bound envs spread over the cores, and hundreds
of blocking envs split their threads over N interpreter locks (``bench/bench_runner.py``).

The run's event loop sends and reads without blocking, many answers per read. One env's
calls run in order: an env is sent its next call only once the previous one answered (e.g. a
step its episode stopped waiting for). A worker that dies, or holds a call past
``step_timeout`` (it is killed: a thread cannot be), is restarted with fresh envs by the
host's one rerun (:meth:`~gem.host.recovery.Recovery.rerun`): a worker holding several envs
sends their snapshots now and then with its answers, so its other envs go on in the fresh
worker from their last snapshots, the calls since replayed, and only an env without a state,
or whose replay answers otherwise, lost its episode and says so on its next call
(:data:`~gem.host.failures.EPISODE_LOST`). The call that killed the worker fails
(:data:`~gem.host.failures.WORKER_DIED`; ``StepTimeoutError`` for one that hung). Calls run
side by side, so a death with several unanswered does not say which one killed it: in the
fresh worker every env goes back to its state and those calls run again one at a time, so
that a second death names its call. A worker killed between calls costs no call.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
from collections.abc import Callable
from typing import Any

from gem.core import Env
from gem.errors import StepTimeoutError, VectorEnvError
from gem.executor import ThreadPool
from gem.host.calls import Call
from gem.host.failures import STEP_TIMEOUT, Failure, timed_out
from gem.host.recovery import Recovery
from gem.host.worker import Worker, default_start_method


class _Dispatch:
    """The run's side of one worker's calls: the answers awaited, the calls waiting for their
    env's previous one, and the worker's restarts (the worker itself is ``self.worker``)."""

    def __init__(self, owner: ProcessEnvs, indices: list[int]) -> None:
        self.owner = owner
        self.indices = indices
        #: call id -> (its answer, the call): calls sent and not answered, or waiting for their env's
        self.futures: dict[int, tuple[asyncio.Future, Call]] = {}
        self.running: dict[int, int] = {}  # env index -> the id of its call the worker has (at most one)
        self.queued: dict[int, collections.deque[int]] = {}  # env index -> ids of its calls waiting for that one
        self.outbox: list[tuple[int, Call]] = []
        self.starting: asyncio.Future | None = None  # a restart in progress
        self.closed = False
        self._flush_pending = False
        # the worker runs every call it holds at once; threads to spare for calls a deadline gave up on
        self.worker = Worker([(i, owner.make_env, None, "disabled", "raise") for i in indices], owner.method,
                             concurrency=4 * len(indices) + 16, name="gem-runner").start()
        self.env_ids = self.worker.env_ids
        self.recovery = Recovery(self.env_ids, "raise", owner.step_timeout, [])  # type: ignore[arg-type]
        self.recovery.execute = self.recovery.one_at_a_time(lambda call: self.worker.execute(call, owner.step_timeout))

    # -- process life ---------------------------------------------------------------------
    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        loop.add_reader(self.worker.conn.fileno(), self._read)

    def _detach(self) -> None:
        try:
            self.loop.remove_reader(self.worker.conn.fileno())
        except (ValueError, OSError):
            pass

    def _died(self) -> None:
        if self.starting is not None:
            return
        self._lose(self.worker.died())

    def _timed_out(self, call_id: int) -> None:
        if call_id not in self.futures or self.starting is not None:
            return
        call = self.futures[call_id][1]
        culprit = self.running[call[0]] if call[0] in self.running else call_id
        if culprit != call_id:  # it waited behind a call of its env that its episode gave up on, and still runs
            self.queued[call[0]].remove(call_id)
            failure = timed_out(call[0], self.env_ids.get(call[0]), call[1], self.owner.step_timeout,
                                "its worker process was killed and restarted")
            self.futures.pop(call_id)[0].set_result(failure)
        self._lose(None, culprit)

    def _lose(self, died: str | None, culprit: int | None = None) -> None:
        """The process died (``died`` says how) or hung in call ``culprit`` (``died=None``):
        restart it and answer the calls it had (:meth:`_replace_process`); calls made meanwhile wait."""
        self.starting = self.loop.create_future()
        self._detach()
        owed = [(call_id, self.futures[call_id][1]) for call_id in self.running.values()]
        self.running, self.outbox = {}, []
        if culprit is None and len(owed) == 1:  # the one call it ran (or, killed from outside, about to)
            culprit = owed[0][0]
        # calls whose episode gave up on them are not run again (their envs' next calls are resets)
        suspects = [(i, c) for i, c in owed if i != culprit and not self.futures[i][0].done()]
        known = next(((i, c) for i, c in owed if i == culprit), None)
        self.owner.background(self._replace_process(owed, known, suspects, died))

    async def _replace_process(self, owed: list[tuple[int, Call]], culprit: tuple[int, Call] | None,
                               suspects: list[tuple[int, Call]], died: str | None) -> None:
        starting = self.starting
        try:
            answers = await self.owner.pool.run(self._restart, culprit, suspects, died)
        except BaseException as exc:  # calls waiting for the restart hear why it failed
            for call_id in [i for i, _ in owed] + [i for q in self.queued.values() for i in q]:
                future = self.futures.pop(call_id, (None,))[0]
                if future is not None and not future.done():
                    future.set_exception(exc)
            self.queued = {}
            starting.set_exception(exc)
            starting.exception()  # retrieved: nobody may be waiting
            self.starting = None
            return
        for call_id, _ in owed:
            future = self.futures.pop(call_id)[0]
            if not future.done():
                future.set_result(answers.get(call_id))
        self.starting = None
        if self.closed:
            starting.set_result(None)
            return
        self.attach(self.loop)
        starting.set_result(None)
        for index in list(self.queued):
            self._next(index)

    def _restart(self, culprit: tuple[int, Call] | None, suspects: list[tuple[int, Call]],
                 died: str | None) -> dict[Any, Any]:
        """In a thread: a fresh worker in place of the dead one, and the answers to the calls it owed."""
        self.worker.kill()
        answers = self.recovery.rerun(self.indices, self.worker.start, self.recovery.execute, culprit, suspects, died)
        if self.closed:  # the run ended meanwhile (here, not in the caller: the run may have cancelled it)
            self.worker.stop()
        return answers

    # -- calls ------------------------------------------------------------------------------
    async def call(self, index: int, method: str, *args: Any) -> Any:
        while self.starting is not None:
            await asyncio.shield(self.starting)
        call: Call = (index, method, args, {})
        if self.recovery.lost and index in self.recovery.lost:
            if method != "reset":  # a reset starts on the fresh env; anything else belonged to the lost episode
                return _answer(self.recovery.after_loss(index, call))
            del self.recovery.lost[index]
        call_id = next(self.owner.ids)
        future = self.loop.create_future()
        self.futures[call_id] = (future, call)
        if index in self.running:  # its previous call (one its episode gave up on) still runs
            self.queued.setdefault(index, collections.deque()).append(call_id)
        else:
            self._send(call_id, call)
        if self.owner.step_timeout is None:
            result = await future
        else:
            timer = self.loop.call_later(self.owner.step_timeout, self._timed_out, call_id)
            try:
                result = await future
            finally:
                timer.cancel()
        return _answer(result)

    def _send(self, call_id: int, call: Call) -> None:
        self.running[call[0]] = call_id
        self.outbox.append((call_id, call))
        if not self._flush_pending:  # one message per worker per loop iteration
            self._flush_pending = True
            self.loop.call_soon(self._flush)

    def _next(self, index: int) -> None:
        """Send env ``index`` its next waiting call (or answer it, if the env lost its episode)."""
        queue = self.queued.get(index)
        while queue:
            call_id = queue.popleft()
            future, call = self.futures[call_id]
            if index in self.recovery.lost:
                if call[1] != "reset":
                    self.futures.pop(call_id)
                    if not future.done():
                        future.set_result(self.recovery.after_loss(index, call))
                    continue
                del self.recovery.lost[index]
            self._send(call_id, call)
            break
        if not queue:
            self.queued.pop(index, None)

    def _flush(self) -> None:
        self._flush_pending = False
        if not self.outbox or self.starting is not None:
            return
        batch, self.outbox = self.outbox, []
        if not self.worker.send(batch):  # died: the reader sees the end of the connection
            self._died()

    def _read(self) -> None:
        answers, open_ = self.worker.answers()
        for call_id, answer in answers:
            future, call = self.futures.pop(call_id)
            value = self.recovery.answered(call, answer)
            del self.running[call[0]]
            if call[0] in self.queued:
                self._next(call[0])
            if not future.done():  # a cancelled wait leaves nobody to tell
                future.set_result(value)
        if not open_:
            self._detach()
            self._died()

    def close(self) -> None:
        """The run ended: the worker closes its envs (:meth:`ProcessEnvs.close` waits for them)."""
        self.closed = True
        self._detach()
        if self.starting is None:
            self.worker.ask_to_close()


def _answer(result: Any) -> Any:
    """A worker's answer to a call, or the error its failure says."""
    if type(result) is Failure:
        if result.type == STEP_TIMEOUT:
            raise StepTimeoutError(f"env {result.message}")
        message = f"{result.describe()}\n{result.traceback}" if result.traceback else result.describe()
        raise VectorEnvError(message, result.index, result.env_id)
    return result


class ProcessEnvs:
    """The envs of a run with ``processes=N``: ``slots`` envs spread over N worker processes."""

    def __init__(self, make_env: Callable[[], Env], slots: int, processes: int, step_timeout: float | None,
                 pool: ThreadPool) -> None:
        self.make_env = make_env
        self.step_timeout = step_timeout
        self.pool = pool
        self.method = default_start_method()  # chosen once: a restarted worker builds its envs as the first did
        self.ids = itertools.count()  # call ids, unique in the run
        self._tasks: set[asyncio.Task] = set()
        workers = max(1, min(processes, slots))
        self.workers: list[_Dispatch] = []
        loop = asyncio.get_running_loop()
        try:
            for w in range(workers):
                self.workers.append(_Dispatch(self, list(range(w, slots, workers))))
                self.workers[-1].attach(loop)
        except BaseException:
            self.close()
            raise
        self.env_id = next(iter(self.workers[0].env_ids.values()))
        # slots taken in turn from each worker, so that a run with fewer episodes still uses them all
        self.free = collections.deque((worker, i) for i in range(slots) for worker in self.workers
                                      if i in worker.env_ids)

    def background(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for worker in self.workers:
            worker.close()
        for worker in self.workers:
            if worker.starting is None:  # a restart in progress stops its worker itself
                worker.worker.stop()


class ProcessEnv:
    """One env slot of :class:`ProcessEnvs`, with the async half of the Env API the runner uses."""

    def __init__(self, envs: ProcessEnvs) -> None:
        self.envs = envs
        self.worker, self.index = envs.free.popleft()
        self.env_id = envs.env_id
        #: ``await astep(action)``: the worker's call itself, no coroutine around it (every step's path)
        self.astep: Callable[[str], Any] = functools.partial(self.worker.call, self.index, "step")

    async def areset(self, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        return await self.worker.call(self.index, "reset", seed, {})

    def close(self) -> None:
        """The episode is over and its run keeps no envs between episodes: the slot serves the next
        one (its env, reset, closes with the others in :meth:`ProcessEnvs.close`)."""
        self.envs.free.append((self.worker, self.index))
