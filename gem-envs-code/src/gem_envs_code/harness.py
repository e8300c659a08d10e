"""Run one test of one program in gem-tools' sandbox and judge it, where the program
cannot reach the verdict.

- stdin/stdout test: the program runs alone with the test's input; this process
  compares its whole output with the expected one, which never enters the sandbox.
  Output is kept up to :func:`io_output_bound` bytes (1 MiB, or twice the expected
  output when that is longer); a program that prints more fails the test, saying so.
- function test (HumanEval's ``check(candidate)``, MBPP's asserts): two sandboxed
  processes. The *program* process (``_program.py``) runs the agent's code and answers
  calls with plain values; the *judge* process (``_judge.py``) runs the problem's
  setup and test code as written, its calls to the program's names going over a
  channel this process relays line by line. Only the judge's last line is a verdict;
  the program can answer calls (which is what a function does) and nothing else, so
  nothing it prints, patches or exits with decides a pass. The program is a fresh
  warm fork per test; the judge, which runs only trusted code, is a resident run kept
  from one clean verdict to the next test (:mod:`gem_envs_code.judges`).

>>> from gem_tools.sandbox import Sandbox
>>> from gem_envs_code.problems import IOTest
>>> run_test(Sandbox(), IOTest("2 3", "5"), "a, b = map(int, input().split()); print(a + b)").passed  # doctest: +SKIP
True
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem_envs_code import judges
from gem_envs_code.problems import AssertTest, IOTest, Problem, normalize_output
from gem_envs_code.pyparse import parse_python
from gem_tools.sandbox import Limits, ResidentRun, Sandbox, SandboxResult, Status
from gem_tools.sandbox.limits import MiB
from gem_tools.sandbox.runner import Process, run_sync

_HERE = Path(__file__).parent
_WIRE = (_HERE / "_wire.py").read_text(encoding="utf-8")
#: the scripts the two sandboxes run: the wire format's source, then the side's own
PROGRAM = _WIRE + "\n" + (_HERE / "_program.py").read_text(encoding="utf-8")
JUDGE = _WIRE + "\n" + (_HERE / "_judge.py").read_text(encoding="utf-8")
#: how much of an input, output or error a failure message keeps
SHOWN = 600
#: the least stdout an stdin/stdout test keeps and compares whole (see :func:`io_output_bound`)
IO_OUTPUT_BOUND = 1 * MiB


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


def io_output_bound(expected: str) -> int:
    """Bytes of stdout an stdin/stdout test with this expected output compares: at least
    :data:`IO_OUTPUT_BOUND`, and twice the expected output's size, so a right answer
    always fits and a longer one fails instead of being judged on a cut prefix.

    >>> io_output_bound("3") == IO_OUTPUT_BOUND
    True
    >>> io_output_bound("x" * (3 * MiB)) == 6 * MiB
    True
    """
    return max(IO_OUTPUT_BOUND, 2 * len(expected.encode("utf-8", "replace")))


def _io_limits(limits: Limits, expected: str) -> Limits:
    bound = io_output_bound(expected)
    return limits.with_(output=max(limits.output, bound), output_kill=max(limits.output_kill, bound))


def referenced_names(code: str) -> list[str]:
    """The plain names ``code`` reads: the ones the judge may take from the program."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return []
    return sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)})


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")


async def arun_test(
    sandbox: Sandbox, test: IOTest | AssertTest, program: str, problem: Problem | None = None,
    index: int = 0, limits: Limits | None = None,
) -> TestResult:  # fmt: skip
    """Run ``test`` against ``program`` in ``sandbox`` and judge it (``problem`` gives a
    function test its setup code and entry point)."""
    limits = limits or sandbox.limits
    if isinstance(test, IOTest):
        limits = _io_limits(limits, test.expected)
        result = await sandbox.arun_python(program, stdin=test.stdin.encode("utf-8", "replace"), limits=limits)
        return _judge_io(test, result, index, limits)
    return await _function_test(sandbox, test, program, problem, index, limits)


def run_test(
    sandbox: Sandbox, test: IOTest | AssertTest, program: str, problem: Problem | None = None,
    index: int = 0, limits: Limits | None = None,
) -> TestResult:  # fmt: skip
    """Sync :func:`arun_test`."""
    return run_sync(arun_test(sandbox, test, program, problem, index, limits))


def _judge_io(test: IOTest, result: SandboxResult, index: int, limits: Limits) -> TestResult:
    shown = {"input": clip(test.stdin), "expected": clip(test.expected)}
    bad = _ended_badly(result, limits.timeout)
    if result.status is Status.LIMIT and result.limit == "output":
        bad = f"printed more than the {limits.output_kill}-byte output bound"
    if bad:
        return TestResult(index, False, bad, {**shown, "error": bad}, result.duration)
    if result.status is Status.ERROR:
        error = tail(result.stderr) or f"exit code {result.exit_code}"
        return TestResult(index, False, error.splitlines()[-1], {**shown, "error": error}, result.duration)
    if result.stdout_truncated:
        # the kept prefix may match while what was cut off is wrong: never judge a cut output
        bad = f"printed more than the {limits.output}-byte output bound"
        return TestResult(index, False, bad, {**shown, "error": bad, "actual": clip(result.stdout)}, result.duration)
    if normalize_output(result.stdout) == normalize_output(test.expected):
        return TestResult(index, True, duration=result.duration)
    return TestResult(index, False, "wrong answer", {**shown, "actual": clip(result.stdout)}, result.duration)


async def _function_test(
    sandbox: Sandbox, test: AssertTest, program: str, problem: Problem | None, index: int, limits: Limits,
) -> TestResult:  # fmt: skip
    setup = problem.setup if problem else ""
    entry = problem.entry_point if problem else None
    names = sorted({*referenced_names(test.code), *([entry] if entry else [])})
    header = _line({"setup": setup, "test": test.code, "entry_point": entry})
    request = _line({"setup": setup, "program": program, "test_setup": problem.test_setup if problem else "",
                     "names": names})  # fmt: skip
    resident = await judges.acquire(sandbox, limits, JUDGE)
    if resident is None:
        return await _with_own_judge(sandbox, header, request, index, limits)
    outcome: tuple[str, Any] = ("timeout", None)
    try:
        # the agent's program arrives on the program's stdin; PROGRAM is ours
        async with sandbox.open_python(PROGRAM, limits=limits, trusted_code=True) as run:
            outcome = await _judged(resident, run, header, request, limits.timeout)
    except BaseException:
        resident.destroy()  # cancelled, or the program could not start: the judge is mid-test
        raise
    clean = outcome[0] == "verdict" and outcome[1].pop("keep", False) is True
    await judges.release(sandbox, limits, resident, clean)
    return _outcome(outcome, resident, run, index, limits.timeout)


async def _with_own_judge(sandbox: Sandbox, header: bytes, request: bytes, index: int, limits: Limits) -> TestResult:
    """The test with a judge started for it alone (where Python runs start cold)."""
    async with contextlib.AsyncExitStack() as stack:
        # both started at once; both scripts are ours (the agent's program arrives on the program's stdin)
        started = await asyncio.gather(
            stack.enter_async_context(sandbox.open_python(JUDGE, limits=limits, trusted_code=True)),
            stack.enter_async_context(sandbox.open_python(PROGRAM, limits=limits, trusted_code=True)),
            return_exceptions=True,
        )
        for failure in started:
            if isinstance(failure, BaseException):
                raise failure
        judge, run = started
        outcome = await _judged(judge, run, header, request, limits.timeout)
    if outcome[0] == "verdict":
        outcome[1].pop("keep", None)
    return _outcome(outcome, judge, run, index, limits.timeout)


async def _judged(judge: Process | ResidentRun, run: Process, header: bytes, request: bytes,
                  timeout: float) -> tuple[str, Any]:  # fmt: skip
    """Give the judge its test and the program its code, then relay until a verdict or ``timeout``."""
    judge.send(header)
    run.send(request)
    try:
        return await asyncio.wait_for(_relay(judge, run), timeout)
    except asyncio.TimeoutError:
        return "timeout", None


async def _relay(judge: Process | ResidentRun, run: Process) -> tuple[str, Any]:
    """Carry lines between the judge and the program until the judge's verdict.

    One answer per request, in turn: a line the program sends unasked is taken as its
    next answer, and the judge rejects it as out of turn."""
    try:
        line = await run.readline()
        while True:
            if not line:
                return "exited", None
            judge.send(line)
            request = await judge.readline()
            if not request:
                return "judge", None
            message = json.loads(request)
            if "verdict" in message:
                return "verdict", message
            run.send(request)
            line = await run.readline()
    except ValueError:  # a line over the limit (or, from the judge, not JSON: our bug)
        return "too_large", None


def _outcome(outcome: tuple[str, Any], judge: Process | ResidentRun, run: Process, index: int,
             timeout: float) -> TestResult:  # fmt: skip
    kind, message = outcome
    program = run.result
    assert program is not None
    duration = program.duration
    if kind == "verdict":
        if message["verdict"] == "pass":
            return TestResult(index, True, duration=duration)
        return _failed(message, index, duration)
    if kind == "timeout":
        bad = f"timed out after {timeout:.3g}s"
        return TestResult(index, False, bad, {"error": bad}, duration)
    if kind == "too_large":
        bad = "the function returned a value too large to check"
        return TestResult(index, False, bad, {"error": bad}, duration)
    if kind == "judge":
        assert judge.result is not None  # a judge that broke off is ended, never kept
        error = tail(judge.result.stderr) or f"exit code {judge.result.exit_code}"
        return TestResult(index, False, f"the test harness failed ({error.splitlines()[-1]})", {"error": error},
                          duration)  # fmt: skip
    bad = _ended_badly(program, timeout)
    if bad:
        return TestResult(index, False, bad, {"error": bad}, duration)
    # the program ended its process itself (exit, os._exit, a crash) before the verdict
    error = tail(program.stderr) or f"exit code {program.exit_code}"
    message_text = "the program exited before the test finished" + (f" ({error.splitlines()[-1]})" if error else "")
    return TestResult(index, False, message_text, {"error": error}, duration)


def _failed(verdict: dict[str, Any], index: int, duration: float) -> TestResult:
    detail = {k: (None if v is None else str(v)) for k, v in verdict.items() if k != "verdict"}
    shown = {"error": tail(detail.get("message") or detail.get("error") or "")}
    if detail.get("test"):
        shown["test"] = clip(detail["test"])
    if detail.get("actual") is not None:
        shown["actual"] = clip(detail["actual"])
    first = shown["error"].splitlines()[-1] if shown["error"] else (detail.get("error") or "failed")
    where = "the program failed before the tests ran: " if detail.get("phase") != "test" else ""
    return TestResult(index, False, where + first, shown, duration)
