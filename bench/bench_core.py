"""Steps per second of a raw env and of each vector backend, at 1, 8 and 64 envs.

Two envs from gem.testing.envs: ``CountEnv`` (trivial: the cost is all framework) and
``BusyEnv`` (each step burns CPU, like puzzle generation or grading). The baseline is
the raw env stepped in a plain loop, measured in the same run; "overhead" is the
vector layer's extra time per env-step over that baseline.

    python bench/bench_core.py [--seconds 0.5]
"""

from __future__ import annotations

import argparse
import importlib.util
import time

import gem
from gem.testing.envs import BusyEnv, CountEnv

ENVS = {"trivial": (CountEnv, {}), "cpu-bound": (BusyEnv, {"work": 20_000})}
SIZES = (1, 8, 64)
BACKENDS = ("sync", "thread", "process") + (("ray",) if importlib.util.find_spec("ray") else ())
#: the ray backend starts a local Ray instance on first use: a small one, without dashboard
BACKEND_KWARGS = {"ray": {"init_kwargs": {"include_dashboard": False, "object_store_memory": 100 * 1024**2}}}


def raw_rate(cls, kwargs, seconds: float) -> float:
    env = cls(**kwargs)
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(env.sample_random_action())
        if terminated or truncated:
            env.reset()
        steps += 1
    return steps / (time.perf_counter() - start)


def vector_rate(env_id: str, backend: str, n: int, seconds: float) -> float:
    with gem.make_vec([env_id] * n, backend=backend, seed=0, backend_kwargs=BACKEND_KWARGS.get(backend)) as envs:
        envs.reset()
        actions = envs.sample_random_action()
        envs.step(actions)  # warm up workers
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            envs.step(actions)
            steps += n
        return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="measuring time per cell")
    args = parser.parse_args()
    gem.register("bench:Trivial-v0", CountEnv)
    gem.register("bench:Busy-v0", BusyEnv, work=20_000)
    ids = {"trivial": "bench:Trivial-v0", "cpu-bound": "bench:Busy-v0"}

    print(f"{'env':<10} {'backend':<8} {'envs':>5} {'steps/s':>12} {'vs raw':>8} {'overhead/step':>14}")
    for name, (cls, kwargs) in ENVS.items():
        raw = raw_rate(cls, kwargs, args.seconds)
        print(f"{name:<10} {'raw':<8} {1:>5} {raw:>12,.0f} {1.0:>7.2f}x {'-':>14}")
        for backend in BACKENDS:
            for n in SIZES:
                rate = vector_rate(ids[name], backend, n, args.seconds)
                overhead_us = (1 / rate - 1 / raw) * 1e6
                print(f"{name:<10} {backend:<8} {n:>5} {rate:>12,.0f} {rate / raw:>7.2f}x {overhead_us:>11.1f} us")


if __name__ == "__main__":
    main()
