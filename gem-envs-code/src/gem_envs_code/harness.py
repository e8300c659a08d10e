"""Run one test of one program in gem-tools' sandbox and judge it.

Each test is a fresh sandbox run holding only what that test needs: for a
stdin/stdout test the program itself (the expected output stays in this process),
for a function test our harness (``_launcher.py``) with the setup code, the program
and that one test sent on stdin, so nothing of any test is on the sandbox's disk.

>>> from gem_tools.sandbox import Sandbox
>>> from gem_envs_code.problems import IOTest
>>> run_test(Sandbox(), IOTest("2 3", "5"), "a, b = map(int, input().split()); print(a + b)").passed  # doctest: +SKIP
True
"""

from __future__ import annotations

import ast
import marshal
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_envs_code.problems import AssertTest, IOTest, Problem, normalize_output
from gem_tools.sandbox import Limits, Sandbox, SandboxResult, Status

LAUNCHER = Path(__file__).with_name("_launcher.py").read_text(encoding="utf-8")
#: how much of an input, output or error a failure message keeps
SHOWN = 600


@dataclass(frozen=True)
class TestResult:
    """How one test went. ``details`` holds what the multi-turn feedback shows:
    ``input``/``expected``/``actual`` or ``test``/``actual``, or ``error``."""

    __test__ = False  # not a pytest class

    index: int
    passed: bool
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    duration: float = 0.0


def clip(text: str, limit: int = SHOWN) -> str:
    """``text`` cut to ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def tail(text: str, lines: int = 8, limit: int = SHOWN) -> str:
    """The last ``lines`` lines of ``text``, at most ``limit`` characters."""
    kept = "\n".join(text.rstrip().splitlines()[-lines:])
    return kept if len(kept) <= limit else "..." + kept[-(limit - 3):]


def _ended_badly(result: SandboxResult, timeout: float) -> str | None:
    """A message when the run ended by a limit, a timeout or a signal."""
    if result.status is Status.TIMEOUT:
        return f"timed out after {timeout:.3g}s"
    if result.status is Status.LIMIT:
        return f"exceeded the {result.limit} limit"
    if result.status is Status.KILLED:
        return f"killed by signal {-(result.exit_code or 0)}"
    return None


@dataclass(frozen=True)
class Prepared:
    """What one test run executes: ``code`` as ``main.py``, fed ``stdin``."""

    code: str
    stdin: bytes
    nonce: str = ""


def prepare(test: IOTest | AssertTest, program: str, problem: Problem | None = None) -> Prepared:
    """The run of ``test`` against ``program``; ``problem`` gives a function test its
    setup code and entry point."""
    if isinstance(test, IOTest):
        return Prepared(program, test.stdin.encode("utf-8", "replace"))
    nonce = secrets.token_hex(16)
    job = {
        "nonce": nonce,
        "setup": problem.setup if problem else "",
        "program": program,
        "test": test.code,
        "entry_point": problem.entry_point if problem else None,
    }
    return Prepared(LAUNCHER, marshal.dumps(job), nonce)


def judge(
    test: IOTest | AssertTest, prepared: Prepared, result: SandboxResult, index: int, timeout: float
) -> TestResult:
    """Whether the run ``result`` of ``prepared`` passed ``test``."""
    if isinstance(test, IOTest):
        return _judge_io(test, result, index, timeout)
    return _judge_function(result, prepared.nonce, index, timeout)


def run_test(
    sandbox: Sandbox, test: IOTest | AssertTest, program: str, problem: Problem | None = None,
    index: int = 0, limits: Limits | None = None,
) -> TestResult:  # fmt: skip
    """Run ``test`` against ``program`` in ``sandbox`` and judge it."""
    limits = limits or sandbox.limits
    prepared = prepare(test, program, problem)
    result = sandbox.run_python(prepared.code, stdin=prepared.stdin, limits=limits)
    return judge(test, prepared, result, index, limits.timeout)


def _judge_io(test: IOTest, result: SandboxResult, index: int, timeout: float) -> TestResult:
    shown = {"input": clip(test.stdin), "expected": clip(test.expected)}
    bad = _ended_badly(result, timeout)
    if bad:
        return TestResult(index, False, bad, {**shown, "error": bad}, result.duration)
    if result.status is Status.ERROR:
        error = tail(result.stderr) or f"exit code {result.exit_code}"
        return TestResult(index, False, error.splitlines()[-1], {**shown, "error": error}, result.duration)
    if normalize_output(result.stdout) == normalize_output(test.expected):
        return TestResult(index, True, duration=result.duration)
    actual = clip(result.stdout) + (" [output truncated]" if result.stdout_truncated else "")
    return TestResult(index, False, "wrong answer", {**shown, "actual": actual}, result.duration)


def _fail_detail(verdict: str | None) -> dict[str, str | None] | None:
    """The dict of a ``FAIL {...}`` verdict (a literal: parsing it runs nothing)."""
    if verdict is None or not verdict.startswith("FAIL "):
        return None
    try:
        detail = ast.literal_eval(verdict[5:])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return {str(k): (None if v is None else str(v)) for k, v in detail.items()} if isinstance(detail, dict) else None


def _judge_function(result: SandboxResult, nonce: str, index: int, timeout: float) -> TestResult:
    verdict = None
    for line in result.stdout.splitlines():
        if line.startswith(nonce + " "):
            verdict = line[len(nonce) + 1:]
    if verdict == "PASS" and result.status is Status.OK:
        return TestResult(index, True, duration=result.duration)
    bad = _ended_badly(result, timeout)
    if bad:
        return TestResult(index, False, bad, {"error": bad}, result.duration)
    detail = _fail_detail(verdict)
    if detail is not None:
        shown = {"error": tail(detail.get("message") or detail.get("error", ""))}
        if detail.get("test"):
            shown["test"] = clip(detail["test"])
        if detail.get("actual") is not None:
            shown["actual"] = clip(detail["actual"])
        first = shown["error"].splitlines()[-1] if shown["error"] else detail.get("error", "failed")
        where = "the program failed before the tests ran: " if detail.get("phase") != "test" else ""
        return TestResult(index, False, where + first, shown, result.duration)
    # no verdict: the program ended the process itself (exit, os._exit, a crash)
    error = tail(result.stderr) or f"exit code {result.exit_code}"
    message = "the program exited before the test finished" + (f" ({error.splitlines()[-1]})" if error else "")
    return TestResult(index, False, message, {"error": error}, result.duration)
