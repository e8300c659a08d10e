"""Issue 21: stdin/stdout tests compare the whole output up to a documented bound.

Before, only the first 64 KiB of stdout was kept and compared, so ``print(3)`` followed
by 70 KiB of blank lines and ``WRONG`` passed against ``3``, and a right program whose
expected output is 100 KiB failed.
"""

from __future__ import annotations

import pytest

from gem_envs_code import harness
from gem_envs_code.harness import run_test
from gem_envs_code.problems import IOTest
from gem_envs_code.sources import PACKAGED, load_packaged


def test_padding_after_a_right_prefix_fails(sandbox) -> None:
    program = "print(3)\nprint('\\n' * 70_000)\nprint('WRONG')"
    result = run_test(sandbox, IOTest("", "3"), program)
    assert not result.passed
    assert result.message == "wrong answer"


def test_right_output_longer_than_the_old_cap_passes(sandbox) -> None:
    expected = "\n".join(str(i) for i in range(20_000))  # about 108 KiB
    result = run_test(sandbox, IOTest("", expected), "for i in range(20_000): print(i)")
    assert result.passed, result.message


def test_output_over_the_bound_fails_and_says_so(sandbox) -> None:
    program = f"import sys\nsys.stdout.write('3\\n' + ' ' * {harness.IO_OUTPUT_BOUND + 10})"
    result = run_test(sandbox, IOTest("", "3"), program)
    assert not result.passed
    assert "output bound" in result.message
    assert "output bound" in result.details["error"]


def test_bound_follows_a_long_expected_output(sandbox) -> None:
    expected = "7\n" * (harness.IO_OUTPUT_BOUND // 2 + 1000)  # a right answer longer than the default bound
    assert harness.io_output_bound(expected) > harness.IO_OUTPUT_BOUND
    result = run_test(sandbox, IOTest("", expected), f"import sys\nsys.stdout.write({expected!r})")
    assert result.passed, result.message


@pytest.mark.parametrize("name", sorted(PACKAGED))
def test_shipped_expected_outputs_fit_the_bound(name: str) -> None:
    for problem in load_packaged(name):
        for test in problem.tests:
            if isinstance(test, IOTest):
                assert len(test.expected.encode()) <= harness.io_output_bound(test.expected) // 2
