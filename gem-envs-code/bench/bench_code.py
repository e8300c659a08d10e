"""HumanEval's canonical solutions through ``gem.runner``, against the plain-subprocess limit.

For each concurrency (default 1, 8, 32), in one run on one machine:

- *env*: ``gem.runner.run_episodes`` over ``eval:HumanEval`` with a policy that answers
  each problem with its reference solution; each answer is judged as in training (two
  sandboxed processes per test: the program, a fresh warm fork, and the trusted judge,
  a resident run kept between tests; no thread per test), in steady state: the warm
  sandboxes and judges a concurrency keeps (two zygotes and a judge per test in flight)
  are started by an untimed round first, as a training run starts them once;
- *plain*: the same programs and tests in one unsandboxed ``python`` subprocess per
  problem, at the same concurrency: what a subprocess per problem can do at best here.

It prints problems/s of each and their ratio (env / plain).

    python gem-envs-code/bench/bench_code.py [--concurrency 1 8 32] [--problems 164] [--out table.md]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from gem.runner import run_episodes
from gem_envs_code.env import CodeEnv, default_python
from gem_envs_code.problems import Problem
from gem_envs_code.sources import load_packaged

TIMEOUT = 20.0


async def env_rate(problems: tuple[Problem, ...], concurrency: int) -> tuple[int, float]:
    """(problems passed, problems/s) through the runner."""
    answers = {p.prompt: f"```python\n{p.meta['canonical']}\n```" for p in problems}

    async def policy(observation: str) -> str:
        return answers[observation]

    # one env per concurrent slot; episode i poses problem i
    class InOrder(CodeEnv):
        async def areset(self, seed=None, **kwargs):
            return self.reset(idx=seed)

    start = time.perf_counter()
    trajectories = await run_episodes(lambda: InOrder(dataset=problems, shuffle=False, test_timeout=TIMEOUT,
                                                      total_timeout=2 * TIMEOUT),
                                      policy, seeds=range(len(problems)), concurrency=concurrency)  # fmt: skip
    seconds = time.perf_counter() - start
    return sum(t.total_return == 1.0 for t in trajectories), len(problems) / seconds


async def plain_rate(problems: tuple[Problem, ...], concurrency: int, python: str) -> tuple[int, float]:
    """(problems passed, problems/s) with one bare subprocess per problem."""
    gate = asyncio.Semaphore(concurrency)

    async def one(problem: Problem) -> bool:
        code = "\n".join([problem.setup, problem.meta["canonical"], problem.tests[0].code])
        async with gate:
            proc = await asyncio.create_subprocess_exec(
                python, "-s", "-c", code, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            return await asyncio.wait_for(proc.wait(), TIMEOUT) == 0

    start = time.perf_counter()
    passed = await asyncio.gather(*(one(p) for p in problems))
    return sum(passed), len(problems) / (time.perf_counter() - start)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--problems", type=int, default=164, help="the first N HumanEval problems")
    parser.add_argument("--out", help="also write the table to this file (markdown)")
    args = parser.parse_args(argv)

    problems = tuple(load_packaged("humaneval"))[: args.problems]
    python = default_python() or sys.executable
    asyncio.run(env_rate(problems[:2], 1))  # warm up: interpreter probe, backend check, cgroup probe
    lines = [
        f"HumanEval canonical solutions, {len(problems)} problems, python {python}",
        "",
        "| concurrency | env passed | env problems/s | plain passed | plain problems/s | env / plain |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    ok = True
    for concurrency in args.concurrency:
        # start the warm sandboxes this concurrency keeps (two per test in flight) before timing
        asyncio.run(env_rate(problems[: 2 * concurrency], concurrency))
        # interleaved, so that a change in the machine's load hits both alike
        env_passed, env_per_s = asyncio.run(env_rate(problems, concurrency))
        plain_passed, plain_per_s = asyncio.run(plain_rate(problems, concurrency, python))
        ok &= env_passed == len(problems)
        lines.append(f"| {concurrency} | {env_passed}/{len(problems)} | {env_per_s:.1f} | "
                     f"{plain_passed}/{len(problems)} | {plain_per_s:.1f} | "
                     f"{env_per_s / plain_per_s:.2f}x |")  # fmt: skip
        print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
