"""Steps per second of every game preset under random actions.

The baseline, measured in the same run by the same loop, is gem-core's trivial
``CountEnv``: the gap between a game and the baseline is the game's own cost (move
parsing, rules, board rendering, and puzzle generation at each reset).

    python gem-envs-games/bench/bench_games.py [--seconds 0.3] [PATTERN]
"""

from __future__ import annotations

import argparse
import time

import gem
from gem.testing.envs import CountEnv


def rate(env: gem.Env, seconds: float) -> tuple[float, float]:
    """(steps/s, resets/s) playing random actions for ``seconds``."""
    env.reset(seed=0)
    steps = resets = 0
    reset_time = 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(env.sample_random_action())
        steps += 1
        if terminated or truncated:
            t = time.perf_counter()
            env.reset()
            reset_time += time.perf_counter() - t
            resets += 1
    elapsed = time.perf_counter() - start
    return steps / elapsed, (resets / reset_time if reset_time else float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pattern", nargs="?", default="game:*-v0-*")
    parser.add_argument("--seconds", type=float, default=0.3, help="measuring time per env")
    args = parser.parse_args()
    baseline, baseline_resets = rate(CountEnv(), args.seconds)
    print(f"{'env id':<36} {'steps/s':>10} {'vs baseline':>12} {'resets/s':>10}")
    print(f"{'baseline: gem.testing CountEnv':<36} {baseline:>10,.0f} {1.0:>11.2f}x {baseline_resets:>10,.0f}")
    for env_id in gem.list_envs(args.pattern):
        env = gem.make(env_id)
        steps, resets = rate(env, args.seconds)
        env.close()
        print(f"{env_id:<36} {steps:>10,.0f} {steps / baseline:>11.3f}x {resets:>10,.0f}")


if __name__ == "__main__":
    main()
