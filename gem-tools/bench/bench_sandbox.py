"""Sandbox start-up latency and throughput per backend, against a plain subprocess.

    python bench/bench_sandbox.py [--runs 40] [--backends bwrap,unshare,rlimit] [--out results.json]

For each backend (and "subprocess": the same interpreter started with no sandbox at
all, measured in the same run), it reports the median and p90 wall time of one
``python -c pass`` and one ``true`` command, and the runs per second with 1, 2 and 4
runs in flight (latencies taken in turns, run by run). The isolating backends are
measured twice: as ``Sandbox`` runs Python by default (warm: forked from a zygote) and
with ``warm=False`` (a fresh sandbox and interpreter per run, "cold"). The last columns
are the ratios to the plain subprocess of the same run (above 1.0: faster than it).
Results print as a table and, with ``--out``, go to a JSON file.
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


def interleaved(fns: list[Callable[[], None]], runs: int) -> list[list[float]]:
    """Wall times of ``runs`` calls of each of ``fns``, taking turns call by call."""
    for fn in fns:
        fn()  # warm caches (probes, page cache, a zygote) before timing
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, kept in zip(fns, times):
            start = time.perf_counter()
            fn()
            kept.append(time.perf_counter() - start)
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
        if box.backend.isolated:
            cold = Sandbox(backend=name, limits=Limits(timeout=30), warm=False)
            targets.append((f"{name}-cold", cold.interpreter.executable, sandboxed(cold, True), sandboxed(cold, False)))

    # latencies interleaved run by run, so that a change in the machine's load hits all alike
    py_times = interleaved([py for _, _, py, _ in targets], args.runs)
    cmd_times = interleaved([cmd for _, _, _, cmd in targets], args.runs)
    for (name, _, py, _), py_t, cmd_t in zip(targets, py_times, cmd_times):
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        row = {
            "python_median_ms": 1000 * statistics.median(py_t),
            "python_p90_ms": 1000 * p90(py_t),
            "true_median_ms": 1000 * statistics.median(cmd_t),
        }
        for workers in CONCURRENCY:
            throughput(py, workers, workers)  # untimed: a warm sandbox starts its zygotes for this concurrency
            row[f"python_runs_per_s_x{workers}"] = throughput(py, args.runs, workers)
        rows[name] = row

    plain = rows["subprocess"]
    base = plain["python_median_ms"]
    top = CONCURRENCY[-1]
    for row in rows.values():
        row["latency_vs_plain"] = base / row["python_median_ms"]
        row[f"runs_per_s_x{top}_vs_plain"] = row[f"python_runs_per_s_x{top}"] / plain[f"python_runs_per_s_x{top}"]
    header = (f"{'backend':<13} {'python ms':>10} {'p90 ms':>8} {'true ms':>8} {'overhead ms':>11} "
              + " ".join(f"{f'runs/s x{w}':>10}" for w in CONCURRENCY)
              + f" {'latency vs plain':>16} {f'runs/s x{top} vs plain':>21}")  # fmt: skip
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        print(
            f"{name:<13} {row['python_median_ms']:>10.1f} {row['python_p90_ms']:>8.1f} {row['true_median_ms']:>8.1f} "
            f"{row['python_median_ms'] - base:>11.1f} "
            + " ".join(f"{row[f'python_runs_per_s_x{w}']:>10.1f}" for w in CONCURRENCY)
            + f" {row['latency_vs_plain']:>15.2f}x {row[f'runs_per_s_x{top}_vs_plain']:>20.2f}x"
        )
    for name, exe, _, _ in targets:
        print(f"  {name}: python = {exe}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"runs": args.runs, "python": sys.executable, "results": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
