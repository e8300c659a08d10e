"""Sandbox start-up latency and throughput per backend, against a plain subprocess.

    python bench/bench_sandbox.py [--runs 40] [--backends bwrap,unshare,rlimit] [--out results.json]

For each backend (and "subprocess": the same interpreter started with no sandbox at
all, measured in the same run), it reports the median and p90 wall time of one
``python -c pass`` and one ``true`` command, and the runs per second with 1, 2 and 4
runs in flight. Results print as a table and, with ``--out``, go to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from gem_tools.sandbox import Limits, Sandbox, available_backends

CONCURRENCY = (1, 2, 4)


def plain_python() -> None:
    subprocess.run([sys.executable, "-s", "-c", "pass"], capture_output=True, check=True)


def plain_true() -> None:
    subprocess.run(["true"], capture_output=True, check=True)


def sandboxed(box: Sandbox, python: bool) -> Callable[[], None]:
    def run() -> None:
        result = box.run_python("pass") if python else box.run_command(["true"])
        if not result.ok:
            raise RuntimeError(f"{box.backend_name}: {result.status} {result.stderr[-300:]}")

    return run


def latencies(fn: Callable[[], None], runs: int) -> list[float]:
    fn()  # warm caches (probes, page cache) before timing
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def throughput(fn: Callable[[], None], runs: int, workers: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda _: fn(), range(runs)))
    return runs / (time.perf_counter() - start)


def p90(values: list[float]) -> float:
    return sorted(values)[int(0.9 * (len(values) - 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per measurement")
    parser.add_argument("--backends", default="bwrap,unshare,rlimit")
    parser.add_argument("--out", help="also write the results here as JSON")
    args = parser.parse_args(argv)

    status = available_backends()
    rows: dict[str, dict[str, float]] = {}
    targets: list[tuple[str, str, Callable[[], None], Callable[[], None]]] = [
        ("subprocess", sys.executable, plain_python, plain_true)
    ]
    for name in args.backends.split(","):
        if status.get(name) is not None:
            print(f"skipping {name}: {status[name]}", file=sys.stderr)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the rlimit backend's "not isolation" warning
            box = Sandbox(backend=name, limits=Limits(timeout=30))
        targets.append((name, box.interpreter.executable, sandboxed(box, True), sandboxed(box, False)))

    for name, _, py, cmd in targets:
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        py_times, cmd_times = latencies(py, args.runs), latencies(cmd, args.runs)
        row = {
            "python_median_ms": 1000 * statistics.median(py_times),
            "python_p90_ms": 1000 * p90(py_times),
            "true_median_ms": 1000 * statistics.median(cmd_times),
        }
        for workers in CONCURRENCY:
            row[f"python_runs_per_s_x{workers}"] = throughput(py, args.runs, workers)
        rows[name] = row

    base = rows["subprocess"]["python_median_ms"]
    header = (f"{'backend':<11} {'python ms':>10} {'p90 ms':>8} {'true ms':>8} {'overhead ms':>11} "
              + " ".join(f"{f'runs/s x{w}':>10}" for w in CONCURRENCY))
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        print(
            f"{name:<11} {row['python_median_ms']:>10.1f} {row['python_p90_ms']:>8.1f} {row['true_median_ms']:>8.1f} "
            f"{row['python_median_ms'] - base:>11.1f} "
            + " ".join(f"{row[f'python_runs_per_s_x{w}']:>10.1f}" for w in CONCURRENCY)
        )
    for name, exe, _, _ in targets:
        print(f"  {name}: python = {exe}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"runs": args.runs, "python": sys.executable, "results": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
