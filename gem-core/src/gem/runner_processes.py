"""Worker processes for ``gem.runner.run_episodes(..., processes=N)``.

Each worker process holds its share of the run's envs and runs every call it is sent in
a :class:`~gem.executor.ThreadPool` of its own (:class:`_Server`), answering each call the
moment it returns: no batch waits for its slowest call, so envs whose steps block (a
sandboxed test run, a tool call) overlap inside a worker as they do in the runner's own
threads, and CPU-bound envs spread over the cores. With hundreds of blocking envs this also
takes their threads off the event loop's interpreter lock: each worker's threads contend
only among themselves (``bench/bench_runner.py``).

One env's calls run in order (a call waits for the env's previous one, e.g. a step its
episode stopped waiting for). A worker that dies, or holds a call past ``step_timeout``
(it is killed: a thread cannot be), is restarted with fresh envs: the calls it was
running fail (:data:`~gem.host.failures.WORKER_DIED` / ``StepTimeoutError``), and its other
envs lost their episodes and say so on their next step
(:data:`~gem.host.failures.EPISODE_LOST`); a reset starts on a fresh env.
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
import threading
from collections.abc import Callable
from typing import Any

from gem.core import Env
from gem.errors import StepTimeoutError, VectorEnvError
from gem.executor import ThreadPool
from gem.host.calls import Call, run_call
from gem.host.failures import Failure, episode_lost, timed_out, worker_died
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
    answers back as the pool hands them over."""

    def __init__(self, conn: _Channel, slots: dict[int, Slot]) -> None:
        self.conn = conn
        self.slots = slots
        self.locks = {index: threading.Lock() for index in slots}  # one call at a time per env
        # a call waiting for its env's previous one (a step its episode gave up on) holds a thread
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

    def _run(self, call: Call) -> Any:
        with self.locks[call[0]]:
            try:
                return run_call(self.slots[call[0]], call)
            except BaseException as exc:  # SystemExit and the like: an answer all the same
                return Failure.from_exc(call[0], self.slots[call[0]].env_id, exc)

    def _send(self, batch: list[tuple[int, Any]]) -> None:
        try:
            self.conn.send(("results", batch))
        except OSError:  # the runner went away: the serving loop hears so
            pass


class _Worker:
    """The runner's side of one worker process."""

    def __init__(self, owner: ProcessEnvs, indices: list[int]) -> None:
        self.owner = owner
        self.indices = indices
        self.futures: dict[int, tuple[asyncio.Future, Call]] = {}  # call id -> (answer, call)
        self.outbox: list[tuple[int, Call]] = []
        self.lost: dict[int, str] = {}  # env index -> why its episode is gone
        self.starting: asyncio.Future | None = None  # a restart in progress
        self.closed = False
        self._flush_pending = False
        self._start()

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

    def _restart(self, reason: str, culprits: dict[int, BaseException]) -> None:
        """The process died or hung: fail its calls in flight (``culprits`` say how; the others lost
        their episodes), mark its other envs' episodes lost, and start a fresh process (calls made
        meanwhile wait for it)."""
        if self.starting is not None:
            return
        self.starting = self.loop.create_future()
        self._detach()
        in_flight, self.futures, self.outbox = self.futures, {}, []
        busy = set()
        for call_id, (future, call) in in_flight.items():
            busy.add(call[0])
            if not future.done():
                future.set_exception(culprits.get(call_id) or self._lost_error(call[0], reason))
        for index in self.indices:
            if index not in busy:
                self.lost[index] = reason
        self.owner.background(self._replace_process())

    async def _replace_process(self) -> None:
        starting = self.starting
        try:
            self.process.kill()
            await self.owner.pool.run(self.process.join)
            self.conn.close()
            await self.owner.pool.run(self._start)
            if self.closed:  # the run ended meanwhile
                self._stop()
                return
            self.attach(self.loop)
        except BaseException as exc:  # calls waiting for the restart hear why it failed
            starting.set_exception(exc)
            starting.exception()  # retrieved: nobody may be waiting
        else:
            starting.set_result(None)
        finally:
            self.starting = None

    def _lost_error(self, index: int, reason: str) -> VectorEnvError:
        failure = episode_lost(index, self.env_ids.get(index), reason)
        return VectorEnvError(failure.describe(), index, failure.env_id)

    def _died(self) -> None:
        if self.starting is not None:
            return
        self.process.join(0.5)
        code = self.process.exitcode
        reason = f"its worker process died (exit code {code}); it was restarted with fresh envs"
        culprits: dict[int, BaseException] = {}
        for call_id, (_, call) in self.futures.items():  # which of them killed it cannot be known
            failure = worker_died(call[0], self.env_ids.get(call[0]),
                                  f"the worker process running this {call[1]} died (exit code {code}); it was "
                                  "restarted with a fresh env")
            culprits[call_id] = VectorEnvError(failure.describe(), call[0], failure.env_id)
        self._restart(reason, culprits)

    def _timed_out(self, call_id: int) -> None:
        if call_id not in self.futures or self.starting is not None:
            return
        _, call = self.futures[call_id]
        reason = (f"env {call[0]}'s {call[1]} in the same worker process hung past step_timeout="
                  f"{self.owner.step_timeout} s; the worker was restarted with fresh envs")
        failure = timed_out(call[0], self.env_ids.get(call[0]), call[1], self.owner.step_timeout,
                            "its worker process was killed and restarted")
        error = StepTimeoutError(f"env {failure.message}")
        self._restart(reason, {call_id: error})

    # -- calls ------------------------------------------------------------------------------
    async def call(self, index: int, method: str, *args: Any) -> Any:
        while self.starting is not None:
            await asyncio.shield(self.starting)
        if self.lost and index in self.lost:
            reason = self.lost.pop(index)
            if method != "reset":  # a reset starts on the fresh env; anything else belonged to the lost episode
                raise self._lost_error(index, reason)
        call_id = next(self.owner.ids)
        call: Call = (index, method, args, {})
        future = self.loop.create_future()
        self.futures[call_id] = (future, call)
        self.outbox.append((call_id, call))
        if not self._flush_pending:  # one message per worker per loop iteration
            self._flush_pending = True
            self.loop.call_soon(self._flush)
        if self.owner.step_timeout is None:
            result = await future
        else:
            timer = self.loop.call_later(self.owner.step_timeout, self._timed_out, call_id)
            try:
                result = await future
            finally:
                timer.cancel()
        if type(result) is Failure:
            raise VectorEnvError(f"{result.describe()}\n{result.traceback}", result.index, result.env_id)
        return result

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
            for _kind, payload in self.conn.received():
                for call_id, result in payload:
                    entry = self.futures.pop(call_id, None)
                    if entry is not None and not entry[0].done():  # a cancelled wait leaves nobody to tell
                        entry[0].set_result(result)
        except (EOFError, OSError):
            self._detach()
            self._died()

    def close(self) -> None:
        self.closed = True
        self._detach()
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
