"""Resident judges: one judge process serves test after test, and only a test that ended cleanly keeps it.

The program side is untouched (a fresh warm fork per test, see test_hostile.py); these tests check
the judge's side: reused across tests and event loops, nothing of one test visible to the next, and
a fresh judge after any test that did not end with a clean verdict."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from gem_envs_code import judges
from gem_envs_code.env import default_python
from gem_envs_code.harness import arun_test, run_test
from gem_envs_code.problems import AssertTest, Problem
from gem_tools.sandbox import Limits, Sandbox

PROBLEM = Problem("p", "write f", (AssertTest("assert f(2) == 4"),), setup="import math\n", entry_point="f")
RIGHT = "def f(x):\n    return x * x"


@pytest.fixture
def box():
    # a pool of its own (a unique environment is a unique pool), so the idle judges counted here are this test's
    box = Sandbox(limits=Limits(timeout=3), python=default_python(), env={"GEM_TEST_POOL": secrets.token_hex(6)})
    assert box.path()[0] == "warm", box.path()
    yield box
    judges.close()
    box._pool().close()


def idle(box: Sandbox) -> list:
    return list(judges._IDLE.get(judges._key(box, box.limits), []))


def test_one_judge_serves_consecutive_tests_across_event_loops(box):
    assert run_test(box, PROBLEM.tests[0], RIGHT, PROBLEM).passed  # a sync call: a loop of its own
    (judge,) = idle(box)
    assert not run_test(box, PROBLEM.tests[0], "def f(x):\n    return 5", PROBLEM).passed
    assert run_test(box, PROBLEM.tests[0], RIGHT, PROBLEM).passed
    assert idle(box) == [judge] and judge.alive()


def test_nothing_of_one_test_reaches_the_next_in_the_same_judge(box):
    leaves = AssertTest("left_behind = 1\nassert f(2) == 4")
    finds = AssertTest("assert 'left_behind' not in globals() and 'math' in globals()\nassert f(2) == 4")
    assert run_test(box, leaves, RIGHT, PROBLEM).passed
    (judge,) = idle(box)
    assert run_test(box, finds, RIGHT, PROBLEM).passed  # a fresh namespace, with the setup run again
    assert idle(box) == [judge]


@pytest.mark.parametrize("program, says", [
    ("def f(x):\n    while True:\n        pass", "timed out"),
    ("def f(x):\n    import os\n    os._exit(0)", "exited before the test finished"),
    ("def f(x):\n    return 'x' * (20 << 20)", "too large"),
])  # fmt: skip
def test_a_test_that_ends_without_a_clean_verdict_costs_its_judge(box, program, says):
    assert run_test(box, PROBLEM.tests[0], RIGHT, PROBLEM).passed
    (judge,) = idle(box)
    result = run_test(box, PROBLEM.tests[0], program, PROBLEM)
    assert not result.passed and says in result.message, result
    assert idle(box) == [] and not judge.alive()
    assert run_test(box, PROBLEM.tests[0], RIGHT, PROBLEM).passed  # a fresh judge
    (fresh,) = idle(box)
    assert fresh is not judge


def test_a_module_the_program_names_is_imported_in_the_judge_and_costs_it(box):
    test = AssertTest("assert helper.rgb_to_hsv(0.0, 0.0, 0.0) == (0.0, 0.0, 0.0)")
    assert run_test(box, PROBLEM.tests[0], RIGHT, PROBLEM).passed
    (judge,) = idle(box)
    assert run_test(box, test, "import colorsys as helper\n" + RIGHT, PROBLEM).passed
    assert idle(box) == [] and not judge.alive()  # colorsys now sits in that judge: it is not kept


def test_a_cancelled_test_ends_its_judge_and_the_next_test_gets_a_fresh_one(box):
    slow = "def f(x):\n    import time\n    time.sleep(30)"

    async def cancelled():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(arun_test(box, PROBLEM.tests[0], slow, PROBLEM), 0.5)

    asyncio.run(cancelled())
    assert idle(box) == []
    assert run_test(box, PROBLEM.tests[0], RIGHT, PROBLEM).passed


def test_concurrent_tests_take_a_judge_each_and_keep_them(box):
    async def many():
        return await asyncio.gather(*[arun_test(box, PROBLEM.tests[0], RIGHT, PROBLEM) for _ in range(4)])

    assert all(r.passed for r in asyncio.run(many()))
    assert len(idle(box)) == 4
    assert all(r.passed for r in asyncio.run(many()))
    assert len(idle(box)) == 4


def test_a_cold_sandbox_starts_a_judge_per_test():
    cold = Sandbox(limits=Limits(timeout=3), python=default_python(), warm=False)
    before = judges.idle_count()
    assert run_test(cold, PROBLEM.tests[0], RIGHT, PROBLEM).passed
    assert not run_test(cold, PROBLEM.tests[0], "def f(x):\n    return 5", PROBLEM).passed
    assert judges.idle_count() == before
