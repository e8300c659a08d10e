"""Run all tests of one program: concurrently, under a per-test and a total time budget.

>>> from gem_tools.sandbox import Sandbox
>>> from gem_envs_code.problems import IOTest, Problem
>>> problem = Problem("add", "Add two numbers", (IOTest("1 2", "3"), IOTest("5 5", "10")))
>>> runner = TestRunner(Sandbox(), concurrency=2)
>>> runner.run(problem, "print(sum(map(int, input().split())))").all_passed  # doctest: +SKIP
True
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from gem_envs_code.harness import TestResult, arun_test
from gem_envs_code.problems import Problem
from gem_tools.sandbox import Sandbox
from gem_tools.sandbox.runner import run_sync

# below this many seconds of total budget a test is not worth starting
_MIN_RUN = 0.05
_EXHAUSTED = "total time budget exhausted"


@dataclass(frozen=True)
class RunReport:
    """The outcome of one program's test run.

    ``results`` holds the tests that ran, by index; with ``stop_on_failure`` the tests
    after the first failure may not have run. ``first_failure`` is the failing test of
    lowest index: every test before it ran, so it is the same whatever the timing.
    """

    total: int
    results: tuple[TestResult, ...]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def all_passed(self) -> bool:
        return self.passed == self.total

    @property
    def fraction(self) -> float:
        return self.passed / self.total

    @property
    def first_failure(self) -> TestResult | None:
        return next((r for r in self.results if not r.passed), None)


class TestRunner:
    """Runs a problem's tests in ``sandbox``, ``concurrency`` tests at a time.

    Each test gets ``test_timeout`` seconds but never more than what is left of
    ``total_timeout`` for the whole program; a test that cannot start in time fails
    with "total time budget exhausted". The tests run as asyncio subprocesses
    (:meth:`arun`): many in flight take no thread each; :meth:`run` drives the same
    coroutine from sync code.
    """

    __test__ = False  # not a pytest class

    def __init__(
        self, sandbox: Sandbox, concurrency: int = 4, test_timeout: float = 6.0, total_timeout: float = 60.0,
    ) -> None:  # fmt: skip
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.sandbox = sandbox
        self.concurrency = concurrency
        self.test_timeout = test_timeout
        self.total_timeout = total_timeout

    async def arun(self, problem: Problem, program: str, stop_on_failure: bool = True) -> RunReport:
        """Run every test of ``problem`` against ``program``."""
        deadline = time.monotonic() + self.total_timeout
        failed = False
        # FIFO: the tests start in index order, so every test before a failure has
        # started by the time a later one can see it
        gate = asyncio.Semaphore(self.concurrency)

        async def one(index: int) -> TestResult | None:
            nonlocal failed
            async with gate:
                if stop_on_failure and failed:
                    return None
                left = deadline - time.monotonic()
                if left < _MIN_RUN:
                    result = TestResult(index, False, _EXHAUSTED, {"error": _EXHAUSTED})
                else:
                    limits = self.sandbox.limits.with_(timeout=min(self.test_timeout, left))
                    result = await arun_test(self.sandbox, problem.tests[index], program, problem, index, limits)
                if not result.passed:
                    failed = True
                return result

        outcomes = await asyncio.gather(*(one(i) for i in range(len(problem.tests))))
        return RunReport(len(problem.tests), tuple(r for r in outcomes if r is not None))

    def run(self, problem: Problem, program: str, stop_on_failure: bool = True) -> RunReport:
        """Sync :meth:`arun`."""
        return run_sync(self.arun(problem, program, stop_on_failure))

    def close(self) -> None:
        """Nothing to release (kept for callers that close their runner)."""
