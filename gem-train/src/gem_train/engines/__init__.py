"""Generation engines: vLLM and a transformers fallback behind one interface.

>>> engine = make_engine("hf", "runs/demo/model")                      # doctest: +SKIP
>>> [gen] = engine.generate([[1, 2, 3]], Sampling(temperature=1.0, max_tokens=8))  # doctest: +SKIP
>>> gen.token_ids, gen.logprobs, gen.finish_reason                     # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from gem_train.engines.base import ContinuousEngine, Engine, Generation, Sampling


def make_engine(kind: str, model_path: str, **options: Any) -> Engine:
    """An engine of ``kind`` serving the model folder ``model_path``: ``hf`` or ``vllm`` (a batch per call),
    ``hf_async`` or ``vllm_async`` (continuous batching: also ``agenerate``, one request that returns when done)."""
    if kind == "hf":
        from gem_train.engines.hf import HFEngine

        return HFEngine(model_path, **options)
    if kind == "hf_async":
        from gem_train.engines.hf_async import HFAsyncEngine

        return HFAsyncEngine(model_path, **options)
    if kind == "vllm":
        from gem_train.engines.vllm import VLLMEngine

        return VLLMEngine(model_path, **options)
    if kind == "vllm_async":
        from gem_train.engines.vllm_async import VLLMAsyncEngine

        return VLLMAsyncEngine(model_path, **options)
    raise ValueError(f"unknown engine {kind!r}: use hf, hf_async, vllm or vllm_async")


__all__ = ["ContinuousEngine", "Engine", "Generation", "Sampling", "make_engine"]
