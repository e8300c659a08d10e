"""What the agent reads after a failed attempt in the multi-turn code env."""

from __future__ import annotations

from gem_envs_code.harness import TestResult
from gem_envs_code.runner import RunReport

FENCE = "```"


def _block(label: str, text: str) -> str:
    return f"{label}:\n{text.rstrip()}\n" if "\n" in text.rstrip() else f"{label}: {text.strip()}\n"


def failure_feedback(report: RunReport, attempts_left: int) -> str:
    """The failing test's input, expected and actual output, or the error's last lines.

    >>> from gem_envs_code.harness import TestResult
    >>> r = RunReport(2, (TestResult(0, False, "wrong answer", {"input": "1 2", "expected": "3", "actual": "4"}),))
    >>> print(failure_feedback(r, 1))  # doctest: +NORMALIZE_WHITESPACE
    Your program failed test 1 of 2 (wrong answer).
    Input: 1 2
    Expected output: 3
    Your output: 4
    <BLANKLINE>
    You have 1 attempt left. Answer with the corrected program in a single ```python code block.
    """
    failure: TestResult | None = report.first_failure
    lines = []
    if failure is None:  # partial credit counted the tests, none failed: cannot happen on a retry
        lines.append("Your program did not pass every test.\n")
    else:
        lines.append(f"Your program failed test {failure.index + 1} of {report.total} ({failure.message}).\n")
        shown = failure.details
        if "input" in shown:
            lines.append(_block("Input", shown["input"] or "(empty)"))
            lines.append(_block("Expected output", shown["expected"] or "(empty)"))
        if "test" in shown:
            lines.append(_block("Test", shown["test"]))
        if "actual" in shown:
            label = "Your output" if "input" in shown else "Your function returned"
            lines.append(_block(label, shown["actual"] or "(nothing)"))
        # a failed assert is told by the test and the value; its traceback adds nothing
        bare_assert = "test" in shown and shown.get("error", "").endswith("AssertionError")
        if "error" in shown and shown["error"] != failure.message and not bare_assert:
            lines.append(_block("Error", shown["error"]))
    plural = "attempt" if attempts_left == 1 else "attempts"
    lines.append(f"\nYou have {attempts_left} {plural} left. Answer with the corrected program in a single "
                 f"{FENCE}python code block.")  # fmt: skip
    return "".join(lines)
