"""vLLM with continuous batching: each request returns as soon as its own response is done.

:class:`VLLMEngine` answers a whole batch of prompts per ``generate`` call, so one long
response holds every episode of its batch. This engine instead feeds requests into vLLM's
v1 engine (``LLM.llm_engine``, the one ``LLM.generate`` steps) whenever they arrive, and a
background thread steps it: the scheduler admits new requests between decode steps, and a
request that finishes is handed back at once, so its episode's env step overlaps the
generation of the others.

Why not ``vllm.v1.engine.async_llm.AsyncLLM``: in vLLM 0.32 it always runs the engine core
in a separate process (``EngineCoreClient.make_async_mp_client``; the
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` switch only applies to ``LLMEngine``). Weight sync
then has to cross a process boundary: a callable is refused without
``VLLM_ALLOW_INSECURE_SERIALIZATION=1``, so the state dict would go through a file for
``collective_rpc("reload_weights", kwargs={"weights_path": ...})``, and on CPU two more
processes (engine core and worker, both importing torch and vLLM) took 112 s to start on
this 2-core machine against 14 s in-process. Stepping the in-process engine gives the same
scheduler (same continuous batching, same per-request seeded sampling, same
``processed_logprobs``) and keeps today's in-memory weight sync.

>>> engine = make_engine("vllm_async", "runs/demo/model")                       # doctest: +SKIP
>>> gen = await engine.agenerate([1, 2, 3], Sampling(temperature=1.0, max_tokens=8), seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any

from gem_train.engines.base import Generation, Sampling, Weights
from gem_train.engines.vllm import VLLMEngine, sampling_params, to_generation

# what the loop thread hands the stepping thread: a request, or a call to run between steps
_Request = tuple[str, list[int], Any, asyncio.AbstractEventLoop, asyncio.Future]


class VLLMAsyncEngine(VLLMEngine):
    """:class:`VLLMEngine` plus :meth:`agenerate`: one request at a time, continuously batched.

    ``generate`` (a whole batch per call) still works; the two must not run at the same time.
    """

    def __init__(self, model_path: str, **options: Any) -> None:
        super().__init__(model_path, **options)
        self._engine = self.llm.llm_engine
        self._start()

    def _start(self) -> None:
        self._inbox: queue.SimpleQueue[_Request | Callable[[], None] | None] = queue.SimpleQueue()
        self._ids = itertools.count()
        # the engine is not thread-safe: only the stepping thread touches it while it runs
        self._thread = threading.Thread(target=self._serve, name="gem-train-vllm-async", daemon=True)
        self._thread.start()

    async def agenerate(self, prompt: list[int], sampling: Sampling, seed: int | None = None) -> Generation:
        """One response to ``prompt`` (token ids), returned when it is done; ``seed`` seeds its sampling alone,
        so it draws the same tokens whichever requests it shares decode steps with."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        params = sampling_params(sampling, seed, self.stop_ids)
        self._inbox.put((f"gem-{next(self._ids)}", prompt, params, loop, future))
        return await future

    def load_weights(self, weights: Weights) -> None:
        # between decode steps, on the stepping thread (a reload during a step would corrupt it)
        self._call(lambda: super(VLLMAsyncEngine, self).load_weights(weights))

    def sleep(self) -> None:
        self._call(lambda: super(VLLMAsyncEngine, self).sleep())

    def wake(self, *tags: str) -> None:
        self._call(lambda: super(VLLMAsyncEngine, self).wake(*tags))

    def close(self) -> None:
        if self._thread.is_alive():
            self._inbox.put(None)
            self._thread.join()
        super().close()

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
        from vllm.inputs import TokensPrompt

        self.bind_thread()
        waiting: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        while True:
            # block while idle; between steps take whatever arrived without waiting
            items = [self._inbox.get()] if not waiting else []
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
                request_id, prompt, params, loop, future = item
                try:
                    self._engine.add_request(request_id, TokensPrompt(prompt_token_ids=prompt), params)
                except Exception as exc:  # e.g. a prompt longer than max_model_len: only this request fails
                    _resolve(loop, future, exc, error=True)
                    continue
                waiting[request_id] = (loop, future)
            if not waiting:
                continue
            try:
                outputs = self._engine.step()
            except Exception as exc:  # every request in flight fails with it; the thread serves on
                with contextlib.suppress(Exception):
                    self._engine.abort_request(list(waiting))
                _fail(waiting, exc)
                continue
            for out in outputs:
                if out.finished and out.request_id in waiting:
                    _resolve(*waiting.pop(out.request_id), to_generation(out))


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
