"""Decoding long turns with the HF engines: their KV cache and attention against transformers' own.

transformers' ``DynamicLayer`` adds each decode step's position by concatenation, a copy of every layer's whole
cache per step; ``gem_train.engines.kv_cache.GrowingLayer`` (what the HF engines use) writes the position into
spare room and copies only when the room is full. transformers' ``sdpa`` attention, given a mask, repeats each
key/value head for every query head of its group before attending, another copy of the cache per step;
``gem_train.engines.attention`` (what the HF engines use) lets the group's query heads attend to the cache as it
is. The workload: ``HFEngine.generate`` on a batch of long prompts (random token ids, of lengths from half the
longest up: left-padded, so attention is masked, as in a batch of turns of different episodes) of a small
Qwen3-architecture model built here (random weights, grouped-query attention), sampled at temperature 1 with
per-request seeds, so every mode draws the same tokens (checked). Three modes: transformers' cache and attention
(the baseline), our cache with transformers' attention, and both of ours. Rounds alternate between the modes.

Then the continuous engine (``rollout=hf_async``) on the same model: ``--requests`` requests of such prompts, each
with its own ``max_tokens`` (drawn in 16..``--tokens``), ``--batch`` in flight at a time (a new one is sent as one
returns, as the rollout stream does), so rows leave and join the running batch at most steps. Two modes: each leave
and join copying the whole running batch's cache into new buffers (the previous ``GrowingLayer.keep`` and
``stack``, kept in this file as the baseline) against the cache's own in place (the finished row's place taken by the
last row, joining rows written into places left free).

    python gem-train/bench/bench_kv_cache.py [--batch 32] [--prompt 1024] [--tokens 256] [--rounds 2] [--requests 96]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32, help="requests decoded together")
    parser.add_argument("--prompt", type=int, default=1024, help="prompt tokens of the longest request")
    parser.add_argument("--tokens", type=int, default=256, help="max_tokens of each request")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode (alternating)")
    parser.add_argument("--requests", type=int, default=96, help="requests sent to the continuous engine per round")
    args = parser.parse_args()
    if importlib.util.find_spec("gem_train") is None or importlib.util.find_spec("gem_envs_games") is None:
        print("bench_kv_cache: skipped, needs gem-train and gem-envs-games (pip install -e gem-core -e gem-envs-games "
              "-e gem-train)")
        return
    import torch

    import gem
    from gem_train.config import TinyModelConfig
    from gem_train.engines import Sampling, make_engine
    from gem_train.model import build_tiny_model

    torch.set_num_threads(1)  # the same on every machine the README's figure is repeated on
    # hidden 256, four heads of 64 with two key/value heads: the cache is large beside the weights, as at 1.7B with
    # 1,280-token turns (there 18 GiB of cache to 3.4 GB of weights)
    shape = TinyModelConfig(hidden_size=256, num_layers=4, num_heads=4, num_kv_heads=2, intermediate_size=512,
                            corpus_episodes=8, architecture="qwen3")
    # mode -> (our cache, our attention)
    modes = {"transformers": (False, False), "spare room": (True, False), "+ grouped decode": (True, True)}
    results: dict[str, list[tuple[float, int, list[list[int]]]]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model", lambda: gem.make("game:GuessTheNumber-v0-easy"), shape,
                                     args.prompt + args.tokens + 8, 0)
        engine = make_engine("hf", str(model_dir))
        rng = random.Random(0)
        vocab = engine.model.config.vocab_size
        # lengths from half the longest up, as turns of different episodes are: the batch is left-padded, so the
        # attention gets a mask (with none, transformers' sdpa attends grouped heads without repeating the cache)
        lengths = [args.prompt - (args.prompt // 2) * i // max(args.batch - 1, 1) for i in range(args.batch)]
        prompts = [[rng.randrange(3, vocab) for _ in range(n)] for n in lengths]
        sampling = Sampling(temperature=1.0, max_tokens=args.tokens)
        engine.generate(prompts[:2], Sampling(temperature=1.0, max_tokens=4), seeds=[0, 1])  # warm-up
        try:
            for _ in range(args.rounds):
                for mode, runs in results.items():
                    runs.append(_generate(engine, prompts, sampling, *modes[mode]))
        finally:
            engine.close()
        # the continuous engine: prompts of the same lengths, replies of their own lengths
        requests = [(prompts[i % len(prompts)], Sampling(temperature=1.0, max_tokens=rng.randint(16, args.tokens)))
                    for i in range(args.requests)]
        engine = make_engine("hf_async", str(model_dir))
        continuous: dict[str, list[tuple[float, int, list[list[int]]]]] = {"copy on join and leave": [],
                                                                           "in place": []}
        try:
            for _ in range(args.rounds):
                for mode, runs in continuous.items():
                    runs.append(_stream(engine, requests, args.batch, copying=mode != "in place"))
        finally:
            engine.close()
    tokens = [run[2] for runs in results.values() for run in runs]
    same = all(t == tokens[0] for t in tokens)
    print(f"bench_kv_cache: HFEngine.generate, Qwen3 architecture (hidden 256, 4 layers, 4 heads on 2 key/value "
          f"heads), {args.batch} requests of {args.prompt // 2}-{args.prompt} prompt tokens (left-padded), up to "
          f"{args.tokens} tokens each, {args.rounds} rounds per mode, 1 thread; same tokens in every mode: "
          f"{'yes' if same else 'NO'}")
    _table("KV cache, attention", "vs transformers", results)
    tokens = [run[2] for runs in continuous.values() for run in runs]
    same = all(t == tokens[0] for t in tokens)
    print(f"\nrollout=hf_async, the same model: {args.requests} requests of {args.prompt // 2}-{args.prompt} prompt "
          f"tokens and 16-{args.tokens} new ones each, {args.batch} in flight (one sent as one returns), "
          f"{args.rounds} rounds per mode; same tokens in every mode: {'yes' if same else 'NO'}")
    _table("rows leave and join", "vs copying", continuous)


def _table(what: str, against: str, results: dict[str, list[tuple[float, int, list[list[int]]]]]) -> None:
    """Each mode's tokens/s over its rounds, against the first mode's."""
    print(f"{what:<24} {'gen tok/s':>10} {against:>16}")
    base = None
    for mode, runs in results.items():
        rate = sum(r[1] for r in runs) / sum(r[0] for r in runs)
        base = base or rate
        print(f"{mode:<24} {rate:>10,.0f} {rate / base:>15.2f}x")


def _generate(engine: Any, prompts: list[list[int]], sampling: Any, cache: bool,
              attention: bool) -> tuple[float, int, list]:
    """One timed ``generate`` of every prompt, with the HF engines' own KV cache (``cache``) and attention
    (``attention``) or transformers' (the cache as the prompt pass made it, ``sdpa``)."""
    import gem_train.engines.kv_cache as kv_cache
    from gem_train.engines.attention import NAME

    grow = kv_cache.grow
    if not cache:  # HFEngine.prefill looks grow up at each call
        kv_cache.grow = lambda past: past
    engine.model.set_attn_implementation(NAME if attention else "sdpa")
    try:
        start = time.perf_counter()
        gens = engine.generate(prompts, sampling, seeds=list(range(len(prompts))))
        seconds = time.perf_counter() - start
    finally:
        kv_cache.grow = grow
        engine.model.set_attn_implementation(NAME)
    return seconds, sum(len(g.token_ids) for g in gens), [g.token_ids for g in gens]


def _stream(engine: Any, requests: list[tuple[list[int], Any]], in_flight: int,
            copying: bool) -> tuple[float, int, list]:
    """Every request through ``agenerate``, ``in_flight`` at a time, seeded by its index; with ``copying``, each leave
    and join copies the running batch's whole cache (the previous ``keep`` and ``stack``)."""
    import asyncio

    from gem_train.engines.kv_cache import GrowingLayer

    keep, stack = GrowingLayer.keep, GrowingLayer.stack
    if copying:
        GrowingLayer.keep = _copying_keep
        GrowingLayer.stack = lambda layer, other, width: _copying_stack(layer, other, width, stack)

    async def run() -> list[Any]:
        slots = asyncio.Semaphore(in_flight)

        async def one(i: int) -> Any:
            async with slots:
                return await engine.agenerate(requests[i][0], requests[i][1], seed=i)

        return await asyncio.gather(*(one(i) for i in range(len(requests))))

    try:
        start = time.perf_counter()
        gens = asyncio.run(run())
        seconds = time.perf_counter() - start
    finally:
        GrowingLayer.keep, GrowingLayer.stack = keep, stack
    return seconds, sum(len(g.token_ids) for g in gens), [g.token_ids for g in gens]


def _copying_keep(layer: Any, rows: list[int], start: int) -> None:
    """The previous ``GrowingLayer.keep``: the rows kept, from ``start`` on, copied into new buffers with room."""
    import torch

    from gem_train.engines.base import KV_ROOM

    at = torch.tensor(list(rows), device=layer.keys.device)
    n = layer.keys.shape[-2] - start
    buffers = []
    for cached in (layer.keys, layer.values):
        buffer = cached.new_empty(len(rows), cached.shape[1], n + KV_ROOM, cached.shape[-1])
        torch.index_select(cached[:, :, start:], 0, at, out=buffer[:, :, :n])  # one copy (CPU writes through)
        buffers.append(buffer)
    layer._hold(*buffers, len(rows), 0, n)


def _copying_stack(layer: Any, other: Any, width: int, own: Any) -> None:
    """The previous ``GrowingLayer.stack``: both layers' rows copied into new buffers with room (``own``, the cache's
    ``stack``, takes that path whenever it holds no rows to spare)."""
    layer._held = None
    own(layer, other, width)


if __name__ == "__main__":
    main()
