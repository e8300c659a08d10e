"""Grading throughput on MATH-500: the supervised pool with 1, 2 and 4 workers against
grading in-process without supervision, in one run.

Each response is a MATH-500 reference solution; its final box is compared with the
reference answer through math-verify (the exact-string shortcut is bypassed, so every
grade pays for parsing and comparison, as a model's differently written answer would).

    python bench/bench_grader.py [--limit 500] [--workers 1,2,4] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

from gem_envs_math import sources
from gem_envs_math.extract import extract_final_answer
from gem_envs_math.pool import GradingPool
from gem_envs_math.verify import sympy_equivalent

COMPARE = "gem_envs_math.verify:sympy_equivalent"


def in_process(pairs: list[tuple[str, str]]) -> tuple[float, int]:
    started = time.perf_counter()
    correct = sum(sympy_equivalent(answer, reference) for answer, reference in pairs)
    return time.perf_counter() - started, correct


def pooled(pairs: list[tuple[str, str]], workers: int) -> tuple[float, int, int, str]:
    with GradingPool(workers=workers, timeout=10.0) as pool:
        where, _ = pool.isolation()
        # start the workers first: process start-up is not grading throughput
        with ThreadPoolExecutor(workers) as warm:
            list(warm.map(lambda _: pool.call("math:sqrt", 1.0), range(workers)))
        started = time.perf_counter()
        # twice as many callers as workers, as envs stepping from a thread backend would be
        with ThreadPoolExecutor(2 * workers) as callers:
            outcomes = list(callers.map(lambda pair: pool.call(COMPARE, *pair), pairs))
        seconds = time.perf_counter() - started
        timeouts = sum(o.status != "ok" for o in outcomes)
        return seconds, sum(o.value is True for o in outcomes), timeouts, where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=500, help="how many MATH-500 problems (default all)")
    parser.add_argument("--workers", default="1,2,4", help="pool sizes to measure (default 1,2,4)")
    parser.add_argument("--out", help="also write the rows as JSON to this file")
    args = parser.parse_args()

    problems = list(sources.load_packaged("math500"))[: args.limit]
    pairs = [(extract_final_answer(p["solution"]) or "", p["answer"]) for p in problems]
    rows = []
    seconds, correct = in_process(pairs)
    rows.append({"mode": "in-process, unsupervised", "workers": 0, "seconds": seconds, "correct": correct})
    for workers in (int(w) for w in args.workers.split(",")):
        seconds, correct, failed, where = pooled(pairs, workers)
        rows.append({"mode": "supervised pool", "workers": workers, "seconds": seconds, "correct": correct,
                     "timeouts": failed, "isolation": where})  # fmt: skip

    print(f"MATH-500 reference answers: {len(pairs)} grades, {os.cpu_count()} CPUs; "
          f"pool workers: {rows[-1].get('isolation', '-')}")  # fmt: skip
    print(f"{'mode':<26} {'workers':>7} {'answers/s':>10} {'seconds':>8} {'correct':>8} {'vs in-process':>14}")
    for row in rows:
        row["answers_per_s"] = len(pairs) / row["seconds"]
        workers = row["workers"] or "-"
        ratio = row["answers_per_s"] / rows[0]["answers_per_s"]
        print(f"{row['mode']:<26} {workers:>7} {row['answers_per_s']:>10.1f} {row['seconds']:>8.2f} "
              f"{row['correct']:>5}/{len(pairs)} {ratio:>13.2f}x")  # fmt: skip
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
