"""Continuous batching's thread: one background thread owns an engine and steps it; requests join between steps.

An engine with continuous batching (``vllm_async``, ``hf_async``) subclasses :class:`SteppingEngine` and says how
to add one request (:meth:`~SteppingEngine._add`), how to run one step of every request in flight
(:meth:`~SteppingEngine._step`, which names the requests it finished) and how to drop requests after a failed
step (:meth:`~SteppingEngine._abort`). ``agenerate`` hands a request to the thread and awaits its answer; a request
that finishes is answered at once, so its episode's env step overlaps the generation of the others. Anything else
that touches the engine (a weight load, sleep, wake) runs on the same thread between two steps (:meth:`_call`).
"""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

#: the longest an idle engine gathers requests before its first step
GATHER_CAP_S = 0.1

# what the event loop's side hands the stepping thread: a request, or a call to run between steps
_Request = tuple[str, Any, asyncio.AbstractEventLoop, asyncio.Future]


class SteppingEngine:
    """The stepping thread and its inbox; a subclass provides :meth:`_add`, :meth:`_step` and :meth:`_abort`."""

    #: the stepping thread's name
    thread_name = "gem-train-engine"
    #: seconds an idle engine waits, after a request, for more before its first step (each arrival within this
    #: restarts the wait, up to :data:`GATHER_CAP_S` in all): requests that come together start together, so they
    #: finish together (0: start at once)
    gather_s = 0.0

    def _start(self) -> None:
        self._inbox: queue.SimpleQueue[_Request | Callable[[], None] | None] = queue.SimpleQueue()
        self._ids = itertools.count()
        # the engine is not thread-safe: only the stepping thread touches it while it runs
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)
        self._thread.start()

    async def _submit(self, payload: Any) -> Any:
        """Hand one request (``payload``, as :meth:`_add` takes it) to the stepping thread; its answer when done."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._inbox.put((f"gem-{next(self._ids)}", payload, loop, future))
        return await future

    def _add(self, request_id: str, payload: Any) -> None:
        """Take one request into the engine (on the stepping thread); an exception fails this request alone."""
        raise NotImplementedError

    def _step(self) -> list[tuple[str, Any]]:
        """One step of every request in flight; ``(request_id, answer)`` of those it finished (an exception as the
        answer fails that request alone). An exception raised fails every request in flight."""
        raise NotImplementedError

    def _abort(self, request_ids: list[str]) -> None:
        """Drop these requests after a step failed (best effort)."""

    def _on_thread_start(self) -> None:
        """Runs first on the stepping thread (the engine's device, say)."""

    def _stop_thread(self) -> None:
        if self._thread.is_alive():
            self._inbox.put(None)
            self._thread.join()

    def _call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the stepping thread between two steps and wait for it; its exception is raised here."""
        done = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # handed back to the caller
                failure.append(exc)
            finally:
                done.set()

        self._inbox.put(run)
        done.wait()
        if failure:
            raise failure[0]

    def _serve(self) -> None:
        try:
            self._on_thread_start()
        except Exception as exc:  # every request fails with it (none is left waiting for a thread that stopped)
            self._serve_broken(exc)
            return
        waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        while True:
            # block while idle; between steps take whatever arrived without waiting
            items = [self._inbox.get()] if not waiting else []
            if items and isinstance(items[0], tuple) and self.gather_s > 0:
                items += self._gather()
            while True:
                try:
                    items.append(self._inbox.get_nowait())
                except queue.Empty:
                    break
            for item in items:
                if item is None:
                    _fail(waiting, RuntimeError("the engine was closed"))
                    return
                if callable(item):
                    item()
                    continue
                request_id, payload, loop, future = item
                try:
                    self._add(request_id, payload)
                except Exception as exc:  # e.g. a prompt longer than max_model_len: only this request fails
                    _resolve(loop, future, exc, error=True)
                    continue
                waiting[request_id] = (loop, future)
            if not waiting:
                continue
            try:
                finished = self._step()
            except Exception as exc:  # every request in flight fails with it; the thread serves on
                self._abort(list(waiting))
                _fail(waiting, exc)
                continue
            for request_id, answer in finished:
                if request_id in waiting:
                    _resolve(*waiting.pop(request_id), answer, error=isinstance(answer, BaseException))

    def _serve_broken(self, exc: BaseException) -> None:
        """The stepping thread could not start: answer each request with ``exc`` and run calls, until closed."""
        while (item := self._inbox.get()) is not None:
            if callable(item):
                item()
            else:
                _resolve(item[2], item[3], exc, error=True)

    def _gather(self) -> list[Any]:
        """What arrives while arrivals are at most :attr:`gather_s` apart (at most :data:`GATHER_CAP_S` in all)."""
        items: list[Any] = []
        deadline = time.perf_counter() + GATHER_CAP_S
        while time.perf_counter() < deadline:
            try:
                item = self._inbox.get(timeout=self.gather_s)
            except queue.Empty:
                break
            items.append(item)
            if not isinstance(item, tuple):  # a close or a call: no more waiting
                break
        return items


def _resolve(loop: asyncio.AbstractEventLoop, future: asyncio.Future, value: Any, error: bool = False) -> None:
    def settle() -> None:
        if not future.done():  # the waiting episode may have been cancelled
            (future.set_exception if error else future.set_result)(value)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # that event loop has closed: nobody waits for the answer
        pass


def _fail(waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]], exc: BaseException) -> None:
    for loop, future in waiting.values():
        _resolve(loop, future, exc, error=True)
    waiting.clear()
