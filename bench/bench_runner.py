"""Steps per second of ``gem.runner`` against the ideal and the thread vector env, in one run.

Each step of the envs here waits 20 ms ± 75 % (uniform in 5..35 ms), the shape of a
sandboxed test run or a tool call: ``blocking`` envs ``time.sleep`` inside a plain
``step`` (``blocking/p2``: the same envs in two worker processes, ``processes=2``);
``async`` envs ``await asyncio.sleep`` in a native ``astep``. The policy
answers at once, so the ideal is ``concurrency / 20 ms`` steps per second. The thread
vector env (``make_vec(..., async_mode=True)``) steps the same envs in lockstep.

A last row compares, for a CPU-bound env, the runner's threads with ``processes=`` (one
worker process per core) and a plain loop.

    python bench/bench_runner.py [--seconds 2] [--concurrency 64 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import os
import statistics
import time

from gem.core import Env
from gem.runner import run
from gem.testing.envs import BusyEnv
from gem.vector import ThreadVectorEnv

MEAN_DELAY = 0.020
TURNS = 10


class BlockingEnv(Env):
    """Ends after ``TURNS`` steps; each step blocks 5..35 ms in ``time.sleep``."""

    def reset(self, seed: int | None = None, **kwargs):
        super().reset(seed)
        self.turn = 0
        return "go", {}

    def delay(self) -> float:
        return MEAN_DELAY * (1 + self.rng.uniform(-0.75, 0.75))

    def step(self, action: str):
        time.sleep(self.delay())
        return self._advance()

    def _advance(self):
        self.turn += 1
        return "go", 0.0, self.turn >= TURNS, False, {}

    def sample_random_action(self) -> str:
        return "x"


class AsyncEnv(BlockingEnv):
    """:class:`BlockingEnv` whose ``astep`` awaits instead of blocking."""

    async def areset(self, seed: int | None = None, **kwargs):
        return self.reset(seed)

    async def astep(self, action: str):
        await asyncio.sleep(self.delay())
        return self._advance()


#: the runner rows: envs whose step blocks in threads of the runner's process, the same envs in
#: worker processes (``processes=2``: their threads split over two interpreter locks), and
#: envs with a native ``astep``
KINDS = (("blocking", BlockingEnv, None), ("blocking/p2", BlockingEnv, 2), ("async", AsyncEnv, None))


def runner_rates(cls: type[Env], concurrency: int, seconds: float, processes: int | None = None
                 ) -> tuple[float, float]:
    """(steady, whole): steps/s while every episode slot is busy (the middle of the run,
    without start-up and the last episodes' tail), and over the whole run."""
    episodes = max(concurrency, int(seconds * concurrency / MEAN_DELAY / TURNS))
    calls: list[float] = []

    async def instant(observation: str) -> str:  # answers at once; each call precedes one step
        calls.append(time.perf_counter())
        return "x"

    start = time.perf_counter()
    trajs = run(cls, instant, seeds=range(episodes), concurrency=concurrency, processes=processes)
    elapsed = time.perf_counter() - start
    return _steady(calls), sum(len(t) for t in trajs) / elapsed


def _steady(times: list[float]) -> float:
    first, last = times[0], times[-1]
    lo, hi = first + 0.2 * (last - first), first + 0.7 * (last - first)
    return sum(lo <= t < hi for t in times) / (hi - lo)


def loop_floor(concurrency: int, seconds: float) -> float:
    """What this event loop on this machine delivers right now: ``concurrency`` tasks
    that only sleep the env's delays, with no env, runner or policy around them."""
    env = BlockingEnv()
    env.reset(seed=0)
    times: list[float] = []

    async def sleeper() -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            await asyncio.sleep(env.delay())
            times.append(time.perf_counter())

    async def main() -> None:
        await asyncio.gather(*(sleeper() for _ in range(concurrency)))

    asyncio.run(main())
    return _steady(sorted(times))


def vector_rate(cls: type[Env], n: int, seconds: float) -> float:
    with ThreadVectorEnv([cls] * n) as envs:
        envs.reset()
        actions = ["x"] * n
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            envs.step(actions)
            steps += n
        return steps / (time.perf_counter() - start)


def cpu_rates(concurrency: int, seconds: float) -> tuple[float, float, float]:
    """(raw loop, runner with threads, runner with one worker process per core) steps/s of
    :class:`~gem.testing.envs.BusyEnv`, whose steps burn CPU (threads share one GIL)."""
    raw_env = BusyEnv(max_turns=TURNS)
    raw_env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds / 2:
        if raw_env.step("\\boxed{0}")[3]:
            raw_env.reset()
        steps += 1
    raw = steps / (time.perf_counter() - start)
    episodes = max(concurrency, int(seconds * raw / TURNS))

    async def wrong(observation: str) -> str:
        return "\\boxed{0}"

    rates = []
    for processes in (None, os.cpu_count() or 1):
        start = time.perf_counter()
        trajs = run(functools.partial(BusyEnv, max_turns=TURNS), wrong, seeds=range(episodes), concurrency=concurrency,
                    processes=processes)
        rates.append(sum(len(t) for t in trajs) / (time.perf_counter() - start))
    return raw, rates[0], rates[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per cell")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds over every cell; each cell's best round counts (the machine is shared)")
    args = parser.parse_args()
    rounds: dict[tuple[int, str], list[float]] = collections.defaultdict(list)
    for _ in range(args.repeats):  # rounds interleave the cells, so a noisy spell hits all of them
        for n in args.concurrency:
            rounds[n, "floor"].append(loop_floor(n, args.seconds))
            rounds[n, "vec"].append(vector_rate(BlockingEnv, n, args.seconds))
            for name, cls, processes in KINDS:
                ours, whole = runner_rates(cls, n, args.seconds, processes)
                rounds[n, name].append(ours)
                rounds[n, name + " whole"].append(whole)
    print(f"steps/s, best of {args.repeats} rounds (runner/ideal's median in brackets); 'runner' is steady "
          "state (every slot busy), 'whole' includes start-up and the tail; 'floor' is bare asyncio.sleep tasks "
          "(no env, no runner) on this machine now")
    print(f"{'env':<11} {'conc':>5} {'ideal':>7} {'floor':>7} {'runner':>7} {'whole':>7} {'vec-thr':>7} "
          f"{'runner/ideal':>12} {'(median)':>8} {'floor/ideal':>11} {'runner/floor':>12} {'vec/ideal':>9} "
          f"{'runner/vec':>10}")
    for n in args.concurrency:
        floor, vec = max(rounds[n, "floor"]), max(rounds[n, "vec"])
        for name, _, _ in KINDS:
            ideal = n / MEAN_DELAY
            ours, median = max(rounds[n, name]), statistics.median(rounds[n, name])
            whole = max(rounds[n, name + " whole"])
            print(f"{name:<11} {n:>5} {ideal:>7,.0f} {floor:>7,.0f} {ours:>7,.0f} {whole:>7,.0f} {vec:>7,.0f} "
                  f"{ours / ideal:>12.0%} {f'({median / ideal:.0%})':>8} {floor / ideal:>11.0%} "
                  f"{ours / floor:>12.0%} {vec / ideal:>9.0%} {ours / vec:>9.2f}x", flush=True)
    raw, threads, processes = cpu_rates(16, args.seconds)
    print(f"\ncpu-bound (BusyEnv), concurrency 16: raw loop {raw:,.0f}, runner threads {threads:,.0f} "
          f"({threads / raw:.2f}x raw), runner processes={os.cpu_count()} {processes:,.0f} "
          f"({processes / raw:.2f}x raw, {processes / threads:.2f}x threads)")


if __name__ == "__main__":
    main()
