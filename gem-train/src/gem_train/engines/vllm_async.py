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

import contextlib
from typing import Any

from gem_train.engines.base import Generation, Sampling, Weights
from gem_train.engines.stepping import SteppingEngine
from gem_train.engines.vllm import VLLMEngine, sampling_params, to_generation


class VLLMAsyncEngine(SteppingEngine, VLLMEngine):
    """:class:`VLLMEngine` plus :meth:`agenerate`: one request at a time, continuously batched.

    ``generate`` (a whole batch per call) still works; the two must not run at the same time.
    """

    thread_name = "gem-train-vllm-async"

    def __init__(self, model_path: str, **options: Any) -> None:
        super().__init__(model_path, **options)
        self._engine = self.llm.llm_engine
        self._start()

    async def agenerate(self, prompt: list[int], sampling: Sampling, seed: int | None = None) -> Generation:
        """One response to ``prompt`` (token ids), returned when it is done; ``seed`` seeds its sampling alone,
        so it draws the same tokens whichever requests it shares decode steps with."""
        return await self._submit((prompt, sampling_params(sampling, seed, self.stop_ids)))

    def load_weights(self, weights: Weights) -> None:
        # between decode steps, on the stepping thread (a reload during a step would corrupt it)
        self._call(lambda: super(VLLMAsyncEngine, self).load_weights(weights))

    def sleep(self) -> None:
        self._call(lambda: super(VLLMAsyncEngine, self).sleep())

    def wake(self, *tags: str) -> None:
        self._call(lambda: super(VLLMAsyncEngine, self).wake(*tags))

    def close(self) -> None:
        self._stop_thread()
        super().close()

    def _on_thread_start(self) -> None:
        self.bind_thread()

    def _add(self, request_id: str, payload: Any) -> None:
        from vllm.inputs import TokensPrompt

        prompt, params = payload
        self._engine.add_request(request_id, TokensPrompt(prompt_token_ids=prompt), params)

    def _step(self) -> list[tuple[str, Any]]:
        return [(out.request_id, to_generation(out)) for out in self._engine.step() if out.finished]

    def _abort(self, request_ids: list[str]) -> None:
        with contextlib.suppress(Exception):
            self._engine.abort_request(request_ids)
