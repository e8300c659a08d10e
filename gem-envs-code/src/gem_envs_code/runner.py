"""Run all tests of one program: concurrently, under a per-test and a total time budget.

>>> from gem_tools.sandbox import Sandbox
>>> from gem_envs_code.problems import IOTest, Problem
>>> problem = Problem("add", "Add two numbers", (IOTest("1 2", "3"), IOTest("5 5", "10")))
>>> runner = TestRunner(Sandbox(), concurrency=2)
>>> runner.run(problem, "print(sum(map(int, input().split())))").all_passed  # doctest: +SKIP
True
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gem_envs_code.harness import TestResult, run_test
from gem_envs_code.problems import Problem
from gem_tools.sandbox import Sandbox

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
    """Runs a problem's tests in ``sandbox``, ``concurrency`` sandboxes at a time.

    Each test gets ``test_timeout`` seconds but never more than what is left of
    ``total_timeout`` for the whole program; a test that cannot start in time fails
    with "total time budget exhausted".
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
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="gem-code-test")
            return self._pool

    def run(self, problem: Problem, program: str, stop_on_failure: bool = True) -> RunReport:
        """Run every test of ``problem`` against ``program``."""
        deadline = time.monotonic() + self.total_timeout
        failed = threading.Event()

        def one(index: int) -> TestResult | None:
            # the pool starts tests in index order, so every test before a failure has
            # started by the time this check can see it
            if stop_on_failure and failed.is_set():
                return None
            left = deadline - time.monotonic()
            if left < _MIN_RUN:
                result = TestResult(index, False, _EXHAUSTED, {"error": _EXHAUSTED})
            else:
                limits = self.sandbox.limits.with_(timeout=min(self.test_timeout, left))
                result = run_test(self.sandbox, problem.tests[index], program, problem, index, limits)
            if not result.passed:
                failed.set()
            return result

        if self.concurrency == 1 or len(problem.tests) == 1:
            outcomes = [one(i) for i in range(len(problem.tests))]
        else:
            pool = self._executor()
            outcomes = [f.result() for f in [pool.submit(one, i) for i in range(len(problem.tests))]]
        return RunReport(len(problem.tests), tuple(r for r in outcomes if r is not None))

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None

