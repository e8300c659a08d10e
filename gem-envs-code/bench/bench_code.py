"""Canonical-solution evaluation of all of HumanEval: sandboxed vs plain subprocesses.

Runs each of the 164 reference solutions against its tests with 1, 2 and 4 runs at
a time, in gem-tools' sandbox (bubblewrap here) and in plain unsandboxed
subprocesses of the same interpreter running the same harness, and prints a table.

    python gem-envs-code/bench/bench_code.py [--workers 1 2 4] [--out table.md]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gem_envs_code.env import default_python
from gem_envs_code.harness import TestResult, judge, prepare, run_test
from gem_envs_code.problems import Problem
from gem_envs_code.sources import load_packaged
from gem_tools.sandbox import Limits, Sandbox, SandboxResult, Status

TIMEOUT = 10.0


def sandboxed(sandbox: Sandbox):
    def run(problem: Problem) -> TestResult:
        return run_test(sandbox, problem.tests[0], problem.meta["canonical"], problem)

    return run


def plain(python: str, workdir: Path):
    def run(problem: Problem) -> TestResult:
        test = problem.tests[0]
        prepared = prepare(test, problem.meta["canonical"], problem)
        with tempfile.TemporaryDirectory(dir=workdir) as cwd:
            (Path(cwd) / "main.py").write_text(prepared.code)
            start = time.monotonic()
            done = subprocess.run([python, "-s", "main.py"], input=prepared.stdin, capture_output=True, cwd=cwd,
                                  timeout=TIMEOUT)  # fmt: skip
            duration = time.monotonic() - start
        result = SandboxResult(
            status=Status.OK if done.returncode == 0 else Status.ERROR, exit_code=done.returncode,
            stdout=done.stdout.decode(errors="replace"), stderr=done.stderr.decode(errors="replace"),
            duration=duration, backend="none",
        )  # fmt: skip
        return judge(test, prepared, result, 0, TIMEOUT)

    return run


def measure(run, problems: tuple[Problem, ...], workers: int) -> tuple[int, float]:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(run, problems))
    return sum(r.passed for r in results), time.perf_counter() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--out", help="also write the table to this file (markdown)")
    args = parser.parse_args(argv)

    problems = load_packaged("humaneval")
    python = default_python() or sys.executable
    sandbox = Sandbox(limits=Limits(timeout=TIMEOUT), python=python)
    sandboxed(sandbox)(problems[0])  # warm up: interpreter probe, backend check
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        modes = [
            (f"sandbox ({sandbox.backend_name})", sandboxed(sandbox)),
            ("plain subprocess", plain(python, Path(scratch))),
        ]
        # interleaved, so that a change in the machine's load hits both modes alike
        for workers in args.workers:
            for label, run in modes:
                passed, seconds = measure(run, problems, workers)
                rows.append((label, workers, passed, seconds))
    rows.sort(key=lambda row: row[0] != modes[0][0])
    base = {label: seconds for label, workers, _, seconds in rows if workers == args.workers[0]}
    plain_time = {w: s for label, w, _, s in rows if label == "plain subprocess"}
    lines = [
        f"HumanEval canonical solutions, {len(problems)} problems, python {python}",
        "",
        "| runs in | workers | passed | wall s | ms / problem | speed-up | vs plain |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, workers, passed, seconds in rows:
        lines.append(
            f"| {label} | {workers} | {passed}/{len(problems)} | {seconds:.2f} | {1000 * seconds / len(problems):.1f} "
            f"| {base[label] / seconds:.2f}x | {seconds / plain_time[workers]:.2f}x |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0 if all(passed == len(problems) for _, _, passed, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
