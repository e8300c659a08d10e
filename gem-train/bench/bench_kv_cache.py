"""Decoding long turns with the HF engines: a KV cache that grows into spare room against transformers' own.

transformers' ``DynamicLayer`` adds each decode step's position by concatenation, a copy of every layer's whole
cache per step; ``gem_train.engines.kv_cache.GrowingLayer`` (what the HF engines use) writes the position into
spare room and copies only when the room is full. The workload: ``HFEngine.generate`` on a batch of long prompts
(random token ids) of a small Qwen3-architecture model built here (random weights, grouped-query attention),
sampled at temperature 1 with per-request seeds, so both modes draw the same tokens (checked). The baseline mode
is the same engine with the cache left as transformers made it. Rounds alternate between the modes.

    python gem-train/bench/bench_kv_cache.py [--batch 32] [--prompt 1024] [--tokens 256] [--rounds 2]
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
    parser.add_argument("--prompt", type=int, default=1024, help="prompt tokens of each request")
    parser.add_argument("--tokens", type=int, default=256, help="max_tokens of each request")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode (alternating)")
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
    results: dict[str, list[tuple[float, int, list[list[int]]]]] = {"concatenation": [], "spare room": []}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model", lambda: gem.make("game:GuessTheNumber-v0-easy"), shape,
                                     args.prompt + args.tokens + 8, 0)
        engine = make_engine("hf", str(model_dir))
        rng = random.Random(0)
        vocab = engine.model.config.vocab_size
        prompts = [[rng.randrange(3, vocab) for _ in range(args.prompt)] for _ in range(args.batch)]
        sampling = Sampling(temperature=1.0, max_tokens=args.tokens)
        engine.generate(prompts[:2], Sampling(temperature=1.0, max_tokens=4), seeds=[0, 1])  # warm-up
        try:
            for _ in range(args.rounds):
                for mode, runs in results.items():
                    runs.append(_generate(engine, prompts, sampling, baseline=mode == "concatenation"))
        finally:
            engine.close()
    same = all(a[2] == b[2] for a, b in zip(results["concatenation"], results["spare room"]))
    print(f"bench_kv_cache: HFEngine.generate, Qwen3 architecture (hidden 256, 4 layers, 2 key/value heads), "
          f"{args.batch} requests of {args.prompt} prompt tokens, up to {args.tokens} tokens each, "
          f"{args.rounds} rounds per mode, 1 thread; same tokens in both modes: {'yes' if same else 'NO'}")
    print(f"{'KV cache':<14} {'gen tok/s':>10} {'vs concatenation':>17}")
    base = None
    for mode, runs in results.items():
        rate = sum(r[1] for r in runs) / sum(r[0] for r in runs)
        base = base or rate
        print(f"{mode:<14} {rate:>10,.0f} {rate / base:>16.2f}x")


def _generate(engine: Any, prompts: list[list[int]], sampling: Any, baseline: bool) -> tuple[float, int, list]:
    """One timed ``generate`` of every prompt; ``baseline``: the prompt pass's cache left as transformers made it."""
    import gem_train.engines.kv_cache as kv_cache

    grow = kv_cache.grow
    if baseline:  # HFEngine.prefill looks grow up at each call
        kv_cache.grow = lambda cache: cache
    try:
        start = time.perf_counter()
        gens = engine.generate(prompts, sampling, seeds=list(range(len(prompts))))
        seconds = time.perf_counter() - start
    finally:
        kv_cache.grow = grow
    return seconds, sum(len(g.token_ids) for g in gens), [g.token_ids for g in gens]


if __name__ == "__main__":
    main()
