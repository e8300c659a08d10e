"""Play every installed env with random actions and print a table of returns.

    python bench/demo.py [PATTERN] [--episodes 3]

Envs whose data is not available here are listed with the reason instead.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gem
from gem.errors import GemError


def play(env_id: str, episodes: int, max_turns: int) -> tuple[list[float], list[int], float]:
    env = gem.make(env_id)
    returns, lengths = [], []
    start = time.perf_counter()
    try:
        for episode in range(episodes):
            env.reset(seed=episode)
            total, turns = 0.0, 0
            while turns < max_turns:
                _, reward, terminated, truncated, _ = env.step(env.sample_random_action())
                total, turns = total + float(reward), turns + 1
                if terminated or truncated:
                    break
            returns.append(total)
            lengths.append(turns)
    finally:
        env.close()
    return returns, lengths, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pattern", nargs="?", default=None)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--max-turns", type=int, default=200)
    args = parser.parse_args()
    ids = gem.list_envs(args.pattern)
    print(f"{'env id':<44} {'mean return':>11} {'min':>7} {'max':>7} {'turns':>6} {'s/episode':>9}")
    for env_id in ids:
        try:
            returns, lengths, seconds = play(env_id, args.episodes, args.max_turns)
        except (GemError, NotImplementedError) as exc:
            print(f"{env_id:<44} not playable here: {str(exc).splitlines()[0][:90]}")
            continue
        print(f"{env_id:<44} {statistics.mean(returns):>11.3f} {min(returns):>7.2f} {max(returns):>7.2f} "
              f"{statistics.mean(lengths):>6.1f} {seconds / args.episodes:>9.3f}")
    print(f"\n{len(ids)} env ids; {args.episodes} random-action episodes each (seeds 0..{args.episodes - 1}).")


if __name__ == "__main__":
    main()
