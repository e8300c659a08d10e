"""The host's worker processes: one lifecycle for every place envs live in a process of their own.

A :class:`Worker` starts a process (``fork`` while the caller has one thread, else
``forkserver``: :func:`default_start_method`) that builds its envs'
:class:`~gem.host.slot.Slot` objects and answers the calls it is sent, each the moment it
returns, with the env's snapshot when one is due (:func:`~gem.host.calls.run_remote`). With
``concurrency=1`` (the vector process backend) the worker runs its calls one after another
in its main thread, where an env may install signal handlers, and the order of the answers
names the call a death interrupted (the first one unanswered). With more (``gem.runner``'s
``processes=``) it runs them side by side in a :class:`~gem.executor.ThreadPool` and sends
the answers that finish about the same time in one message, so envs whose steps block
overlap inside a worker as they do in the runner's own threads.

The caller kills a worker that holds a call past its deadline (a thread cannot be stopped)
or finds it dead, and :meth:`~gem.host.recovery.Recovery.rerun` starts a fresh one and
answers the calls the old one owed; :meth:`Worker.execute` is what it runs them with.

Messages are pickled, each behind its length, over a socket pair that a blocking
``multiprocessing.connection.wait`` or an event loop's reader watches alike. The worker runs
the same envs the caller would run in-process (the caller's code, forked or re-imported), so
it is no less trusted than its caller: pickle from it is what the process backends always used.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import pickle
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from gem.core import Env
from gem.errors import VectorEnvError
from gem.executor import ThreadPool
from gem.host.calls import Call, run_remote
from gem.host.failures import Failure
from gem.host.recovery import Lost
from gem.host.slot import AutoresetMode, Slot

#: what a worker needs to build one env's slot: (env index, factory, env id, autoreset mode, on_error)
SlotArgs = tuple[int, Callable[[], Env], str | None, str, str]

_HEADER = struct.Struct("!Q")
#: bytes read per system call: under the allocator's mmap threshold, so a read costs no mmap and munmap
_CHUNK = 1 << 16
#: how long a worker that is being closed may take to close its envs
CLOSE_WAIT = 5.0
#: with this many calls in flight a worker running calls side by side sends its answers every
#: ``TICK`` seconds (:mod:`gem.executor`), all that finished since the last message in one (each
#: message wakes the caller's event loop, which serves every worker); with fewer, each as it finishes
BUSY = 16


def default_start_method() -> str:
    """``fork`` while this process has a single thread: it needs no ``__main__`` guard
    and works with envs defined in a notebook or script. With other threads alive
    (an inference engine, thread pools) forking is unsafe, so ``forkserver``."""
    return "fork" if threading.active_count() == 1 and os.name == "posix" else "forkserver"


class Channel:
    """Pickled messages over a stream socket, each behind its length: a reader takes whatever
    has arrived in one system call and decodes every whole message in it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: Any) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        self.sock.sendall(_HEADER.pack(len(data)) + data)

    def received(self) -> list[Any]:
        """The whole messages that have arrived, without waiting (none if nothing has);
        EOFError once the other end closed and everything it sent was read."""
        try:
            chunk = self.sock.recv(_CHUNK, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return []
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
        """The next message, waiting for it (as long as the socket's timeout allows)."""
        while True:
            if len(self._buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(self._buffer)
                if len(self._buffer) >= _HEADER.size + size:
                    message = pickle.loads(memoryview(self._buffer)[_HEADER.size:_HEADER.size + size])
                    del self._buffer[:_HEADER.size + size]
                    return message
            chunk = self.sock.recv(_CHUNK)
            if not chunk:
                raise EOFError("the other end closed the connection")
            self._buffer += chunk

    def close(self) -> None:
        self.sock.close()


# -- the worker's side ---------------------------------------------------------------------------
def serve(sock: socket.socket, slot_args: list[SlotArgs], snapshots: bool, concurrency: int) -> None:
    """A worker process's main: build the envs, then answer calls until told to close."""

    conn = Channel(sock)
    try:
        slots: dict[int, Slot] = {}
        for index, fn, env_id, mode, on_error in slot_args:
            try:
                slots[index] = Slot(index, fn, env_id, AutoresetMode(mode), on_error)
            except Exception as exc:
                conn.send(("init_error", Failure.from_exc(index, env_id, exc)))
                return
            if env_id is None:  # a run's envs name themselves
                slots[index].env_id = getattr(slots[index].env, "env_id", None)
        conn.send(("ready", {i: s.env_id for i, s in slots.items()}))
        snapshot = snapshots and len(slots) > 1  # a lone env has no sibling whose death it outlives

        def run(call: Call) -> tuple[Any, bytes | None]:
            slot = slots[call[0]]
            try:
                return run_remote(slot, call, snapshot)
            except BaseException as exc:  # SystemExit and the like: an answer all the same (a snapshot at once)
                failure = Failure.from_exc(call[0], slot.env_id, exc)
                return failure, slot.checkpoint(call[2][0] if call[2] else None, failure, 0.0) if snapshot else None

        def deliver(batch: list[tuple[Any, Any]]) -> None:
            try:
                conn.send(("results", batch))
            except OSError:  # the caller went away: the serving loop hears so
                pass

        pool = None
        if concurrency > 1:
            gc.set_threshold(7000, *gc.get_threshold()[1:])  # many calls in flight (gem.runner.GC_THRESHOLD)
            pool = ThreadPool(concurrency, name="gem-worker", busy=BUSY, deliver=deliver)
        try:
            while True:
                kind, payload = conn.recv()
                if kind == "close":
                    break
                if pool is not None:
                    pool.post(run, payload)
                    continue
                for call_id, call in payload:  # one message per call: a death costs only the calls not yet answered
                    deliver([(call_id, run(call))])
        finally:
            if pool is not None:
                pool.close(wait=0)
        for slot in slots.values():
            slot.env.close()
        conn.send(("closed", None))
    except (EOFError, OSError, KeyboardInterrupt):  # the caller went away
        pass


# -- the caller's side ---------------------------------------------------------------------------
class Worker:
    """One worker process holding the envs of ``slot_args``; see the module's docstring.

    ``method`` is the start method (chosen once by the owner: a restarted worker must
    rebuild its envs the way the first one did), ``snapshots`` whether it sends its envs'
    snapshots (only with siblings), ``concurrency`` how many calls it runs at once, ``name``
    its process's name (and the envs' first index)."""

    def __init__(self, slot_args: list[SlotArgs], method: str, *, snapshots: bool = True, concurrency: int = 1,
                 name: str = "gem-worker") -> None:
        self.slot_args = slot_args
        self.indices = [a[0] for a in slot_args]
        self.method = method
        self.snapshots = snapshots
        self.concurrency = concurrency
        self.name = name
        #: env index -> its id, as the worker's envs name themselves
        self.env_ids: dict[int, str | None] = {}
        self.process: Any = None
        self.conn: Channel | None = None
        self._closing = False

    def start(self) -> Worker:
        """Start the process and wait until its envs are built (blocking); a factory that
        raises says so, a process that exits says what to check."""
        parent, child = socket.socketpair()
        self.process = mp.get_context(self.method).Process(
            target=serve, args=(child, self.slot_args, self.snapshots, self.concurrency), daemon=True,
            name=f"{self.name}-{self.indices[0]}")
        self.process.start()
        child.close()
        self.conn = Channel(parent)
        self._closing = False
        try:
            answer = self.conn.recv()
        except (EOFError, OSError):
            answer = None
        if answer is None or answer[0] != "ready":
            self.kill()
            if answer is not None and isinstance(answer[1], Failure):
                failure = answer[1]
                raise VectorEnvError(f"{failure.describe()} while being created in a worker process\n"
                                     f"{failure.traceback}", failure.index, failure.env_id)
            hint = ""
            if self.method != "fork":
                hint = (f" With the {self.method!r} start method, worker processes re-run your script's top "
                        "level: put the code that starts them (make_vec(..., backend='process'), "
                        "run(..., processes=N)) under `if __name__ == '__main__':`.")
            raise RuntimeError(f"the worker process for envs {self.indices} exited with code "
                               f"{self.process.exitcode} while starting.{hint}")
        self.env_ids = answer[1]
        return self

    def send(self, calls: list[tuple[Any, Call]]) -> bool:
        """Send ``(key, call)`` pairs; the answers come back as ``(key, answer)``. False if
        the worker is gone (its death is found where its answers are awaited)."""
        try:
            self.conn.send(("exec", calls))  # type: ignore[union-attr]
            return True
        except (OSError, ValueError):
            return False

    def answers(self, drain: bool = False) -> tuple[list[tuple[Any, Any]], bool]:
        """The ``(key, answer)`` pairs that have arrived, without waiting, and whether the
        connection is still open; ``drain``: everything left (the process has exited)."""
        answers: list[tuple[Any, Any]] = []
        try:
            while True:
                messages = self.conn.received()  # type: ignore[union-attr]
                for kind, payload in messages:
                    if kind == "results":
                        answers.extend(payload)
                if not drain or not messages:
                    return answers, True
        except (EOFError, OSError):
            return answers, False

    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def died(self) -> str:
        """How the process ended (it has, or is about to)."""
        self.process.join(0.5)
        return f"its worker process died (exit code {self.process.exitcode})"

    def execute(self, call: Call, timeout: float | None) -> tuple[Any, bytes | None]:
        """Run one call and wait for its answer (blocking, at most ``timeout`` seconds):
        what :meth:`~gem.host.recovery.Recovery.rerun` runs calls with. A death or an overrun
        kills the process and raises :class:`~gem.host.recovery.Lost`."""
        conn = self.conn
        conn.sock.settimeout(timeout)  # type: ignore[union-attr]
        try:
            conn.send(("exec", [(None, call)]))  # type: ignore[union-attr]
            while True:
                kind, payload = conn.recv()  # type: ignore[union-attr]
                if kind == "results":
                    return payload[0][1]
        except TimeoutError:
            self.kill()
            raise Lost(call, None) from None
        except (EOFError, OSError):
            died = self.died()
            self.kill()
            raise Lost(call, died) from None
        finally:
            if conn.sock.fileno() != -1:  # type: ignore[union-attr]
                conn.sock.settimeout(None)  # type: ignore[union-attr]

    def kill(self) -> None:
        """End the process now (it hung, or died already)."""
        if self.process is not None:
            self.process.kill()
            self.process.join()
        if self.conn is not None:
            self.conn.close()

    def ask_to_close(self) -> None:
        """Tell the worker to close its envs (:meth:`stop` waits for it): several workers close at once."""
        if not self._closing and self.conn is not None:
            self._closing = True
            try:
                self.conn.send(("close", None))
            except (OSError, ValueError):
                pass

    def stop(self) -> None:
        """Close the worker's envs and end it (killed if it takes longer than :data:`CLOSE_WAIT`)."""
        if self.process is None:
            return
        self.ask_to_close()
        try:
            self.conn.sock.settimeout(CLOSE_WAIT)  # type: ignore[union-attr]
            while self.conn.recv()[0] != "closed":  # type: ignore[union-attr]
                pass
        except (EOFError, OSError, ValueError):
            pass
        self.process.join(CLOSE_WAIT)
        self.kill()
