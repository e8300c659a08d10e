"""Where the blocking calls of async code run.

An env without a native ``astep`` is stepped by running its ``step`` in a thread. The
event loop's default executor has ``min(32, cores + 4)`` threads (6 on a 2-core machine),
so 64 "concurrent" episodes whose step blocks would run 6 at a time. The runner
therefore owns a :class:`ThreadPool` sized to its concurrency (plus a quarter, for threads
still handing a result back) and installs it for the episodes it runs;
:func:`run_blocking` (what ``Env.astep``/``areset`` call by default) uses the installed
pool, and falls back to :func:`asyncio.to_thread` outside a runner.

>>> async def main():  # doctest: +SKIP
...     with ThreadPool(64) as pool, pool.installed():
...         return await run_blocking(time.sleep, 0.01)
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

#: with this many calls in flight the loop collects finished calls every ``TICK`` seconds
#: instead of being woken for them. A wake-up is a socket write in the worker and a read in
#: the loop, each giving up the GIL and waiting to get it back behind hundreds of threads:
#: 256 blocking envs took 121 µs of CPU per step woken, 98 µs collected on the timer (84 %
#: against 88 % of the ideal, ``bench/bench_runner.py``); at 64 the wake-ups are cheaper
#: than the timer's added wait (97 % woken, 94 % on the timer).
BUSY = 128
TICK = 0.0005

_installed: contextvars.ContextVar[ThreadPool | None] = contextvars.ContextVar("gem_thread_pool", default=None)


class ThreadPool:
    """Up to ``threads`` daemon threads for the blocking calls of one run, started as
    calls arrive (a call never waits while fewer than ``threads`` calls are running).

    A call that never returns cannot be stopped (Python cannot kill a thread):
    :meth:`abandon` gives up on one, and the pool may start one more thread so that a
    stuck call costs a thread, never the run's concurrency. The threads are daemons, so
    a stuck one does not keep the interpreter from exiting.

    Results go back to an event loop (:meth:`run`), to a future (:meth:`submit`), or, for
    a caller without a loop, in batches to ``deliver`` (:meth:`post`; a worker process
    answering its runner). Either way, with ``busy`` calls in flight the results are
    collected every ``TICK`` seconds (by the loop, or by a ticker thread for ``deliver``)
    instead of each waking the receiver.
    """

    def __init__(self, threads: int, name: str = "gem-runner", busy: int = BUSY,
                 deliver: Callable[[list[tuple[Any, Any]]], None] | None = None) -> None:
        if threads < 1:
            raise ValueError(f"a thread pool needs at least one thread, got {threads}")
        self.threads = threads
        self.name = name
        #: with this many calls in flight results are collected on the timer (see :data:`BUSY`)
        self.busy = busy
        #: what :meth:`post` hands its results to: ``[(tag, result), ...]``
        self.deliver = deliver
        self._posted: collections.deque[tuple[Any, Any]] = collections.deque()
        self._posting = threading.Lock()  # held by the thread handing a batch to deliver
        self._post_ticking = threading.Event()
        self._post_ticker: threading.Thread | None = None
        self.abandoned = 0
        self._queue: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = 0
        self._outstanding = 0  # calls queued, running or handing back their result
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: collections.deque[tuple[asyncio.Future, bool, Any]] = collections.deque()
        self._wake_pending = False
        self._ticking = False  # the loop collects results on a timer (many calls in flight)
        # what the loop runs _deliver and _tick in: one per pool (only its loop runs them),
        # not a copy of the current context per call
        self._deliver_context = contextvars.Context()
        self._threads: list[threading.Thread] = []

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> asyncio.Future[T]:
        """Run ``fn(*args, **kwargs)`` in this pool (with the caller's context variables):
        ``await pool.run(...)``. The call is queued at once; the future settles on the
        running loop (call this from the loop's thread)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None and not self._loop.is_closed():
                raise RuntimeError("a ThreadPool serves one event loop")
            self._loop = loop
        future = loop.create_future()
        self._put(future, fn, args, kwargs)
        if not self._ticking and self._outstanding >= self.busy:
            self._ticking = True
            loop.call_later(TICK, self._tick, context=self._deliver_context)
        return future

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        """Run ``fn(*args, **kwargs)`` in this pool; for callers without an event loop."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._put(future, fn, args, kwargs)
        return future

    def post(self, fn: Callable[[Any], Any], items: Sequence[tuple[Any, Any]]) -> None:
        """Run ``fn(arg)`` for each ``(tag, arg)`` of ``items`` in this pool and hand
        ``(tag, result)`` to ``deliver``, in one batch with the results that finish about the
        same time (``fn`` runs without the caller's context variables; what it raises is
        handed over as its result)."""
        if self.deliver is None:
            raise RuntimeError("ThreadPool.post needs a pool made with deliver=")
        if self._closed:
            raise RuntimeError("this thread pool is closed")
        with self._lock:  # once for the batch: the pool's threads take this lock after every call
            self._outstanding += len(items)
        for tag, arg in items:
            self._queue.put((tag, _POSTED, fn, arg, None))
        while self._outstanding > self._started and self._started < self.threads + self.abandoned:
            if not self._grow():
                break
        if self._outstanding >= self.busy and not self._post_ticking.is_set():
            if self._post_ticker is None:
                self._post_ticker = threading.Thread(target=self._tick_posted, name=f"{self.name}-ticker",
                                                     daemon=True)
                self._post_ticker.start()
            self._post_ticking.set()

    def _hand_over(self) -> None:
        # whoever holds the lock hands over everything finished so far; a result appended while
        # it does is picked up by its next round (it checks again after releasing)
        while self._posted and self._posting.acquire(blocking=False):
            try:
                batch = []
                while self._posted:
                    batch.append(self._posted.popleft())
                self.deliver(batch)
            finally:
                self._posting.release()

    def _tick_posted(self) -> None:
        """:meth:`_tick` for :meth:`post`: hand results over every ``TICK`` seconds while at
        least ``busy // 2`` calls are in flight."""
        while not self._closed:
            self._post_ticking.wait()
            while self._outstanding >= self.busy // 2 and not self._closed:
                time.sleep(TICK)
                self._hand_over()
            # a worker checks the flag after appending its result: one that saw it set appended
            # before this line and is handed over just below; one that sees it cleared hands over
            self._post_ticking.clear()
            self._hand_over()

    def _put(self, future: Any, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> None:
        if self._closed:
            raise RuntimeError("this thread pool is closed")
        with self._lock:
            self._outstanding += 1
        self._queue.put((future, contextvars.copy_context(), fn, args, kwargs))
        # unlocked, a hint (_grow decides under the lock): most calls find a thread idle
        if self._outstanding > self._started and self._started < self.threads + self.abandoned:
            self._grow()

    def _grow(self) -> bool:
        """Start a thread if a call is waiting for one and the pool is below its size."""
        with self._lock:
            start = self._outstanding > self._started and self._started < self.threads + self.abandoned
            if start:
                self._started += 1
        if start:
            thread = threading.Thread(target=self._work, name=f"{self.name}-{self._started}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return start

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, context, fn, args, kwargs = item
            if context is _POSTED:  # post(): future is the tag, args the argument
                try:
                    value = fn(args)
                except BaseException as exc:  # handed over as the result
                    value = exc
                self._posted.append((future, value))
                if not self._post_ticking.is_set():
                    self._hand_over()
            else:
                try:
                    outcome = (future, True, context.run(fn, *args, **kwargs))
                except BaseException as exc:  # handed to the waiting caller, which re-raises it
                    outcome = (future, False, exc)
                if isinstance(future, concurrent.futures.Future):
                    _settle(*outcome)
                else:
                    self._done.append(outcome)
                    # one wake-up of the loop for all results that finish while it is busy
                    if not self._wake_pending and not self._ticking:
                        self._wake_pending = True
                        try:
                            self._loop.call_soon_threadsafe(self._deliver, context=self._deliver_context)
                        except RuntimeError:  # the loop is closed: nobody is waiting any more
                            pass
            # only now is this thread free (handing the result back may give up the GIL and
            # wait for it behind the others); a call submitted meanwhile is owed a thread
            with self._lock:
                self._outstanding -= 1

    def _deliver(self) -> None:
        self._wake_pending = False  # before draining: a result appended after this schedules another call
        while self._done:
            _settle(*self._done.popleft())

    def _tick(self) -> None:
        """Collect results every ``TICK`` seconds while at least ``busy // 2`` calls are in flight."""
        self._deliver()
        if self._outstanding >= self.busy // 2 and not self._closed:
            self._loop.call_later(TICK, self._tick, context=self._deliver_context)
            return
        # a worker checks the flag after appending its result: one that saw it set appended
        # before this line and is collected just below; one that sees it cleared wakes the loop
        self._ticking = False
        self._deliver()

    def abandon(self) -> None:
        """Give up on a call stuck in one of the pool's threads (see the class docstring)."""
        with self._lock:
            self.abandoned += 1
        self._grow()  # calls queued behind the stuck one get a thread now

    @contextmanager
    def installed(self) -> Iterator[ThreadPool]:
        """Make :func:`run_blocking` use this pool in this context (and tasks started in it)."""
        token = _installed.set(self)
        try:
            yield self
        finally:
            _installed.reset(token)

    def close(self, wait: float = 1.0) -> None:
        """End the threads once their current call returns, waiting at most ``wait`` seconds
        for them (idle ones end at once; a stuck one is left to run on, a daemon)."""
        if not self._closed:
            self._closed = True
            for _ in range(self._started):
                self._queue.put(None)
            self._post_ticking.set()  # its ticker, if any, sees the pool closed and ends
            deadline = time.monotonic() + wait
            for thread in self._threads:
                thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> ThreadPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: what stands in a queued call's context for a :meth:`ThreadPool.post` call
_POSTED = object()


def _settle(future: asyncio.Future | concurrent.futures.Future, ok: bool, value: Any) -> None:
    if future.done():  # a cancelled wait (a timeout) leaves nobody to tell
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def current_pool() -> ThreadPool | None:
    """The pool installed in this context, if any."""
    return _installed.get()


async def run_blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking call off the event loop: in the installed :class:`ThreadPool`, else
    in the loop's default executor (:func:`asyncio.to_thread`)."""
    pool = _installed.get()
    if pool is None:
        return await asyncio.to_thread(fn, *args, **kwargs)
    return await pool.run(fn, *args, **kwargs)
