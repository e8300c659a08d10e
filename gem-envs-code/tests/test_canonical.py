"""Every reference solution of HumanEval and MBPP passes its own tests in our env."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from gem_envs_code.runner import RunReport, TestRunner


@pytest.fixture(scope="module")
def canonical_reports(sandbox, humaneval, mbpp) -> dict[str, RunReport]:
    # all 664 problems once (about 2,000 tests, two sandboxes each): two problems at a
    # time, each problem's tests concurrently. MBPP/123's reference takes about 5 CPU
    # seconds; on a loaded shared machine its wall time doubles, hence the generous limit
    runner = TestRunner(sandbox, concurrency=3, test_timeout=30)
    problems = [*humaneval, *mbpp]
    with ThreadPoolExecutor(2) as pool:
        reports = list(pool.map(lambda p: runner.run(p, p.meta["canonical"]), problems))
    runner.close()
    return {p.id: r for p, r in zip(problems, reports)}


def _failures(reports: dict[str, RunReport], prefix: str) -> dict[str, str]:
    return {k: r.first_failure.message for k, r in reports.items() if k.startswith(prefix) and not r.all_passed}


def test_humaneval_canonical_solutions_all_pass(canonical_reports) -> None:
    assert _failures(canonical_reports, "HumanEval/") == {}


def test_mbpp_canonical_solutions_all_pass(canonical_reports) -> None:
    # MBPP/367's setup code builds trees from the program's own Node class: it passes
    # because the setup runs after the program (see sources.mbpp_problem)
    assert _failures(canonical_reports, "MBPP/") == {}


def test_stub_solutions_fail(sandbox, humaneval, mbpp) -> None:
    runner = TestRunner(sandbox, concurrency=3, test_timeout=5)
    sample = [*humaneval[::8], *mbpp[::25]]
    for problem in sample:
        stub = f"def {problem.entry_point}(*args, **kwargs):\n    return None\n"
        assert not runner.run(problem, stub).all_passed, problem.id
    runner.close()


#: appended to a reference solution: every return value comes back slightly wrong
PERTURBED = """

def _perturb(value):
    if type(value) is bool:
        return not value
    if type(value) in (int, float):
        return value + 1
    if type(value) is str:
        return value + "x"
    if type(value) in (list, tuple):
        return value + type(value)([None])
    return 0 if value is None else None
_reference = {entry}
def {entry}(*args, **kwargs):
    return _perturb(_reference(*args, **kwargs))
"""


def test_nearly_right_solutions_fail(sandbox, humaneval, mbpp) -> None:
    # the reference answer off by one (or negated, or one element longer) on every call:
    # the judge's comparisons, tolerances included, must catch each (all 164 + 100 of
    # MBPP did when this was written; a sample here)
    runner = TestRunner(sandbox, concurrency=3, test_timeout=30)
    sample = [*humaneval[::2], *mbpp[::10]]

    def passes(problem) -> bool:
        program = problem.meta["canonical"] + PERTURBED.replace("{entry}", problem.entry_point)
        return runner.run(problem, program).all_passed

    with ThreadPoolExecutor(2) as pool:
        passed = list(pool.map(passes, sample))
    assert [p.id for p, ok in zip(sample, passed) if ok] == []
