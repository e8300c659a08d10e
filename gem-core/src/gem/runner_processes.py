"""Worker processes for ``gem.runner.run_episodes(..., processes=N)``.

Each worker process holds its share of the run's envs and runs every call it is sent in
a :class:`~gem.executor.ThreadPool` of its own (:class:`_Server`), answering each call the
moment it returns: no batch waits for its slowest call, so envs whose steps block (a
sandboxed test run, a tool call) overlap inside a worker as they do in the runner's own
threads, and CPU-bound envs spread over the cores. With hundreds of blocking envs this also
takes their threads off the event loop's interpreter lock: each worker's threads contend
only among themselves (``bench/bench_runner.py``).

One env's calls run in order: the runner sends an env its next call only once the previous
one answered (e.g. a step its episode stopped waiting for). A worker that dies, or holds a
call past ``step_timeout`` (it is killed: a thread cannot be), is restarted with fresh envs
under the rules of :class:`~gem.host.recovery.Recovery`, as the vector process backend's: a
worker holding several envs sends their snapshots now and then with its answers, so its
other envs go on in the fresh worker from their last snapshots, the calls since replayed,
and only an env without a state, or whose replay answers otherwise, lost its episode and
says so on its next call (:data:`~gem.host.failures.EPISODE_LOST`). The call that killed the
worker fails (:data:`~gem.host.failures.WORKER_DIED`; ``StepTimeoutError`` for one that
hung). A worker runs its calls side by side, so a death with several calls unanswered does
not say which one killed it: in the fresh worker every env goes back to its state and those
calls run again one at a time, so that a second death names its call (as the Ray backend
does). A worker killed between calls costs no call.

The vector process backend's worker (:mod:`gem.vector.process`) is not this one, though both
run :mod:`gem.host.calls` on :class:`~gem.vector.slot.Slot` objects under the same recovery
rules: it runs its calls one after another in the process's main thread, answering each over
a ``multiprocessing`` pipe that the caller's blocking ``connection.wait`` watches beside the
process sentinel; that order is what names the call a death interrupted (the first one
unanswered), and the main thread is the one where an env may install signal handlers. This
worker runs calls side by side in pool threads and sends answers in batches over a socket
that the runner's event loop reads without blocking, many messages per read. One server for
both would run the vector backend's calls off the main thread and, with more than one
thread, out of order, or this worker's calls one at a time, which is the concurrency that
``processes=`` exists for; what is left to share (receive, run, send) is a few lines.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import itertools
import multiprocessing as mp
import pickle
import socket
import struct
from collections.abc import Callable
from typing import Any

from gem.core import Env
from gem.errors import StepTimeoutError, VectorEnvError
from gem.executor import ThreadPool
from gem.host.calls import Call, run_remote
from gem.host.failures import STEP_TIMEOUT, Failure, timed_out, worker_died
from gem.host.recovery import Recovery
from gem.vector.process import default_start_method
from gem.vector.slot import AutoresetMode, Slot

_HEADER = struct.Struct("!Q")


class _Channel:
    """Pickled messages over a stream socket, each behind its length: the runner's event loop
    reads whatever has arrived in one system call and decodes every whole message in it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: Any) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self.sock.sendall(_HEADER.pack(len(data)) + data)

    def received(self) -> list[Any]:
        """The messages that arrived (call when the socket is readable; EOFError once it is closed)."""
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError("the other end closed the connection")
        self._buffer += chunk
        messages, at, end = [], 0, len(self._buffer)
        while end - at >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buffer, at)
            if end - at - _HEADER.size < size:
                break
            at += _HEADER.size
            messages.append(pickle.loads(memoryview(self._buffer)[at:at + size]))
            at += size
        del self._buffer[:at]
        return messages

    def recv(self) -> Any:
        """The next message, waiting for it."""
        while True:
            if len(self._buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self._buffer)
                if len(self._buffer) >= _HEADER.size + size:
                    message = pickle.loads(memoryview(self._buffer)[_HEADER.size:_HEADER.size + size])
                    del self._buffer[:_HEADER.size + size]
                    return message
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("the other end closed the connection")
            self._buffer += chunk

    def close(self) -> None:
        self.sock.close()


#: how long a worker that is being closed may take to close its envs
CLOSE_WAIT = 5.0
#: with this many calls in flight a worker sends its answers every ``TICK`` seconds
#: (:mod:`gem.executor`), all that finished since the last message in one (each message wakes
#: the runner's event loop, which serves every worker); with fewer, each as it finishes
BUSY = 16


def _serve(sock: socket.socket, make_env: Callable[[], Env], indices: list[int]) -> None:
    """A worker process's main: build the envs, then serve calls until told to close."""
    gc.set_threshold(7000, *gc.get_threshold()[1:])  # as the runner does (gem.runner.GC_THRESHOLD)
    conn = _Channel(sock)
    try:
        slots: dict[int, Slot] = {}
        for index in indices:
            try:
                slots[index] = Slot(index, make_env, None, AutoresetMode.DISABLED, "raise")
            except Exception as exc:
                conn.send(("init_error", Failure.from_exc(index, None, exc)))
                return
            slots[index].env_id = getattr(slots[index].env, "env_id", None)
        conn.send(("ready", {i: s.env_id for i, s in slots.items()}))
        _Server(conn, slots).serve()
        for slot in slots.values():
            slot.env.close()
    except (EOFError, OSError, KeyboardInterrupt):  # the runner went away
        pass


class _Server:
    """Runs each call received in a thread of a :class:`~gem.executor.ThreadPool` (enough
    for every call in flight, so a call never waits for another env's) and sends the
    answers back as the pool hands them over, each with the env's snapshot when one is due
    (:func:`~gem.host.calls.run_remote`; only with siblings, whose death it could outlive)."""

    def __init__(self, conn: _Channel, slots: dict[int, Slot]) -> None:
        self.conn = conn
        self.slots = slots
        self.snapshot = len(slots) > 1
        self.pool = ThreadPool(4 * len(slots) + 16, name="gem-worker", busy=BUSY, deliver=self._send)

    def serve(self) -> None:
        try:
            while True:
                kind, payload = self.conn.recv()
                if kind == "close":
                    return
                self.pool.post(self._run, payload)
        finally:
            self.pool.close(wait=0)

    def _run(self, call: Call) -> tuple[Any, bytes | None]:
        slot = self.slots[call[0]]
        try:
            return run_remote(slot, call, self.snapshot)
        except BaseException as exc:  # SystemExit and the like: an answer all the same (and a snapshot at once)
            failure = Failure.from_exc(call[0], slot.env_id, exc)
            arg = call[2][0] if call[2] else None
            return failure, slot.checkpoint(arg, failure, 0.0) if self.snapshot else None

    def _send(self, batch: list[tuple[int, Any]]) -> None:
        try:
            self.conn.send(("results", batch))
        except OSError:  # the runner went away: the serving loop hears so
            pass


class _Lost(Exception):
    """A fresh worker died (``died``: how) or hung (``None``) under ``call`` while recovering."""

    def __init__(self, call: Call, died: str | None) -> None:
        super().__init__(died)
        self.call, self.died = call, died


class _Worker:
    """The runner's side of one worker process."""

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
        self._start()
        self.recovery = Recovery(self.env_ids, "raise", owner.step_timeout, self._execute_now)

    # -- process life ---------------------------------------------------------------------
    def _start(self) -> None:
        """Start the process and wait for its envs (blocking: at the start of a run, or in a thread)."""
        ctx = mp.get_context(self.owner.method)
        parent, child = socket.socketpair()
        self.process = ctx.Process(target=_serve, args=(child, self.owner.make_env, self.indices), daemon=True,
                                   name=f"gem-runner-{self.indices[0]}")
        self.process.start()
        child.close()
        self.conn = _Channel(parent)
        answer = None
        try:
            answer = self.conn.recv()
        except (EOFError, OSError):
            pass
        if answer is None or answer[0] != "ready":
            self.process.join(CLOSE_WAIT)
            self.conn.close()
            if answer is not None and isinstance(answer[1], Failure):
                failure = answer[1]
                raise VectorEnvError(f"{failure.describe()} while being created in a worker process\n"
                                     f"{failure.traceback}", failure.index, failure.env_id)
            hint = ""
            if self.owner.method != "fork":
                hint = (f" With the {self.owner.method!r} start method, worker processes re-run your script's top "
                        "level: put the code that starts the run under `if __name__ == '__main__':`.")
            raise RuntimeError(f"a runner worker process exited with code {self.process.exitcode} while "
                               f"starting.{hint}")
        self.env_ids: dict[int, str | None] = answer[1]

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        loop.add_reader(self.conn.fileno(), self._read)

    def _detach(self) -> None:
        try:
            self.loop.remove_reader(self.conn.fileno())
        except (ValueError, OSError):
            pass

    def _died(self) -> None:
        if self.starting is not None:
            return
        self.process.join(0.5)
        self._lose(f"its worker process died (exit code {self.process.exitcode})")

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
        restart it and answer the calls it had (:meth:`_recover`); calls made meanwhile wait."""
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
            self.process.kill()
            await self.owner.pool.run(self.process.join)
            self.conn.close()
            answers = await self.owner.pool.run(self._recover, culprit, suspects, died)
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
        if self.closed:  # the run ended meanwhile
            self._stop()
            starting.set_result(None)
            return
        self.attach(self.loop)
        starting.set_result(None)
        for index in list(self.queued):
            self._next(index)

    def _recover(self, culprit: tuple[int, Call] | None, suspects: list[tuple[int, Call]],
                 died: str | None) -> dict[int, Any]:
        """In a thread, on fresh workers: answer ``culprit`` (the call that killed or hung the
        worker, if known) and ``suspects`` (the other calls it was running) by
        :class:`~gem.host.recovery.Recovery`'s rules. Every attempt makes progress (a call
        answered or named the culprit, an env given up), so this ends."""
        answers: dict[int, Any] = {}
        for _ in range(len(suspects) + len(self.indices) + 2):
            self._start()
            self.conn.sock.settimeout(self.owner.step_timeout)
            try:
                if culprit is not None:
                    answers[culprit[0]] = self.recovery.worker_lost(self.indices, [culprit[1]], died)[culprit[1][0]]
                    culprit = None
                else:
                    self.recovery.restore(self.indices, f"{died} while it ran {len(suspects)} calls; it was "
                                          "restarted" if suspects else f"{died} between calls; it was restarted")
                while suspects:
                    answers[suspects[0][0]] = self._execute_now([suspects[0][1]])[0]
                    suspects.pop(0)
                self.conn.sock.settimeout(None)
                if self.closed:
                    self._stop()
                return answers
            except _Lost as lost:
                if suspects and lost.call is suspects[0][1]:  # the call that killed it, named
                    culprit = suspects.pop(0)
                elif culprit is not None and lost.call is culprit[1]:  # a reset on its fresh env killed it too
                    answers[culprit[0]] = worker_died(culprit[1][0], self.env_ids.get(culprit[1][0]),
                                                      f"{lost.died or 'it hung'}; it was restarted")
                    culprit = None
                else:  # restoring an env's state killed it: that env lost its episode
                    index = lost.call[0]
                    self.recovery.forget(index)
                    self.recovery.lost[index] = "restoring its state killed a fresh worker process"
                died = lost.died
        raise RuntimeError("the runner's worker process kept dying while its envs were being restored")

    def _execute_now(self, calls: list[Call]) -> list[Any]:
        """:class:`~gem.host.recovery.Recovery`'s ``execute``: the calls, one at a time, on the
        fresh worker (blocking; the connection waits at most the step timeout for each)."""
        answers = []
        for call in calls:
            if call[0] in self.recovery.lost:
                answers.append(self.recovery.after_loss(call[0], call))
                continue
            try:
                self.conn.send(("exec", [(next(self.owner.ids), call)]))
                (_, answer), = self.conn.recv()[1]
            except TimeoutError:
                self._kill()
                raise _Lost(call, None) from None
            except (EOFError, OSError):
                self._kill()
                raise _Lost(call, f"its worker process died (exit code {self.process.exitcode})") from None
            answers.append(self.recovery.answered(call, answer))
        return answers

    def _kill(self) -> None:
        self.process.join(0.5)
        self.process.kill()
        self.process.join()
        self.conn.close()

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
        try:
            self.conn.send(("exec", batch))
        except (OSError, ValueError):  # died: the reader sees the end of the connection
            self._died()

    def _read(self) -> None:
        try:
            messages = self.conn.received()
        except (EOFError, OSError):
            self._detach()
            self._died()
            return
        for _kind, payload in messages:
            for call_id, answer in payload:
                future, call = self.futures.pop(call_id)
                value = self.recovery.answered(call, answer)
                del self.running[call[0]]
                if call[0] in self.queued:
                    self._next(call[0])
                if not future.done():  # a cancelled wait leaves nobody to tell
                    future.set_result(value)

    def close(self) -> None:
        self.closed = True
        self._detach()
        if self.starting is None:
            self._stop()

    def _stop(self) -> None:
        try:
            self.conn.send(("close", None))
        except (OSError, ValueError):
            pass
        self.process.join(CLOSE_WAIT)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


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
        self.method = default_start_method()
        self.ids = itertools.count()  # call ids, unique in the run
        self._tasks: set[asyncio.Task] = set()
        workers = max(1, min(processes, slots))
        self.workers: list[_Worker] = []
        loop = asyncio.get_running_loop()
        try:
            for w in range(workers):
                self.workers.append(_Worker(self, list(range(w, slots, workers))))
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


class ProcessEnv:
    """One env slot of :class:`ProcessEnvs`, with the async half of the Env API the runner uses."""

    def __init__(self, envs: ProcessEnvs) -> None:
        self.worker, self.index = envs.free.popleft()
        self.env_id = envs.env_id
        #: ``await astep(action)``: the worker's call itself, no coroutine around it (every step's path)
        self.astep: Callable[[str], Any] = functools.partial(self.worker.call, self.index, "step")

    async def areset(self, seed: int | None = None) -> tuple[Any, dict[str, Any]]:
        return await self.worker.call(self.index, "reset", seed, {})

    def close(self) -> None:
        """The slot's env closes with the others, in :meth:`ProcessEnvs.close`."""
