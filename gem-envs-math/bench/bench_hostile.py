"""Grader latency of honest answers while hostile ones are in flight, in one run.

For each row a fresh pool of ``--workers`` workers (default 2) takes ``N`` power towers
(``9^{9^{9^9}}``, which never finish; 0, 8, 32 and 100 by default, the last beyond what
the process cap and the memory budget let the pool hold, so new answers are admitted by
evicting paused ones), then grades honest answers (MATH-style comparisons that need sympy:
``\\frac{1}{2}`` vs ``0.5`` and the like), all submitted at once. Deadlines count CPU time,
so the hostile answers would take ``N x --hostile-timeout / workers`` seconds to drain: the
row ends when the honest ones are graded, and closing the pool ends the rest. The baseline
is the same honest answers with nothing else in flight; the table prints each latency as a
ratio against it. Every honest answer must be graded correctly, whatever is in flight.

    python bench/bench_hostile.py [--workers 2] [--timeout 3] [--hostile-timeout 3] [--hostile 0,8,32,100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time

from gem_envs_math.pool import GradingPool

POWER_TOWER = "9^{9^{9^9}}"
HONEST = [
    (r"\frac{1}{2}", "0.5"),
    (r"2\sqrt{2}", r"\sqrt{8}"),
    ("(x+1)^2", "x^2+2x+1"),
    (r"\{3, 2, 1\}", r"\{1,2,3\}"),
    ("50\\%", "0.5"),
    (r"\dfrac{3}{4}", "0.75"),
]


async def measure(args: argparse.Namespace, hostile: int) -> dict:
    with GradingPool(workers=args.workers, timeout=args.timeout) as pool:
        await asyncio.gather(*(pool.acompare("1", "1.0") for _ in range(args.workers)))  # start the workers
        storm = [
            asyncio.ensure_future(pool.acompare(POWER_TOWER, "1", timeout=args.hostile_timeout)) for _ in range(hostile)
        ]
        await asyncio.sleep(0.3)  # the hostile answers hold every worker

        async def timed(answer: str, reference: str) -> tuple[float, bool]:
            started = time.perf_counter()
            verdict = await pool.acompare(answer, reference)
            return time.perf_counter() - started, verdict.correct

        honest = await asyncio.gather(*(timed(a, r) for _ in range(args.rounds) for a, r in HONEST))
        evictions = pool.evictions
    outcomes = await asyncio.gather(*storm)  # closed: those still in flight end "crashed"
    latencies, correct = [t for t, _ in honest], sum(ok for _, ok in honest)
    return {
        "hostile": hostile,
        "honest": len(latencies),
        "correct": correct,
        "median_ms": 1000 * statistics.median(latencies),
        "max_ms": 1000 * max(latencies),
        "hostile_timeouts": sum(o.status == "timeout" for o in outcomes),
        "evictions": evictions,
    }


async def main_async(args: argparse.Namespace) -> list[dict]:
    return [await measure(args, int(n)) for n in args.hostile.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="grading workers (default 2)")
    parser.add_argument("--timeout", type=float, default=3.0, help="CPU seconds per honest answer (default 3)")
    parser.add_argument("--hostile-timeout", type=float, default=3.0, help="CPU seconds per hostile answer (default 3)")
    parser.add_argument("--hostile", default="0,8,32,100", help="hostile answers per row (default 0,8,32,100)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over the honest answers per row")
    parser.add_argument("--out", help="also write the rows as JSON to this file")
    args = parser.parse_args()
    rows = asyncio.run(main_async(args))
    base = rows[0]["median_ms"]
    print(f"honest grading latency, {args.workers} workers, budget {args.timeout:g} CPU s, {os.cpu_count()} CPUs")
    print(f"{'hostile':>8} {'median ms':>10} {'max ms':>8} {'vs 0':>6} {'correct':>8} {'evictions':>10}")
    for row in rows:
        row["ratio_vs_baseline"] = row["median_ms"] / base
        print(f"{row['hostile']:>8} {row['median_ms']:>10.1f} {row['max_ms']:>8.1f} {row['ratio_vs_baseline']:>5.1f}x "
              f"{row['correct']:>4}/{row['honest']:<3} {row['evictions']:>10}")  # fmt: skip
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
