"""Red-team findings on the grader: a parse that fails is wrong (never a prefix), hostile
answers in flight do not hold honest ones back, and asyncio callers hold no threads."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import gem
from gem_envs_math.grading import agrade, grade
from gem_envs_math.pool import GradingPool

POWER_TOWER = "9^{9^{9^9}}"


def test_a_sum_too_deep_to_parse_is_wrong_not_its_first_term() -> None:
    # 7 + 989 ones = 996: the LaTeX parse hits the recursion limit; it used to fall back
    # to the first number and be graded equal to 7
    answer = "7" + "+1" * 989
    with GradingPool(workers=1, timeout=10.0) as pool:
        assert not grade(rf"\boxed{{{answer}}}", "7", pool=pool).correct
        assert pool.compare("7+1+1", "9").correct  # short sums still parse


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_an_honest_answer_is_not_queued_behind_hostile_ones() -> None:
    async def main() -> list[str]:
        order: list[str] = []
        with GradingPool(workers=2, timeout=1.0) as pool:
            assert (await pool.acompare("1", "1.0")).correct

            async def one(label: str, answer: str, reference: str) -> None:
                verdict = await pool.acompare(answer, reference)
                order.append(f"{label}:{verdict.status}:{verdict.correct}")

            hostile = [asyncio.ensure_future(one("hostile", POWER_TOWER, "1")) for _ in range(8)]
            await asyncio.sleep(0.2)  # the hostile ones hold both workers
            await one("honest", r"\frac{1}{2}", "0.5")
            await asyncio.gather(*hostile)
        return order

    order = asyncio.run(main())
    # every hostile answer runs until its deadline; the honest one is graded long before
    assert order[0] == "honest:graded:True"
    assert order[1:] == ["hostile:timeout:False"] * 8


def test_a_queued_answer_is_admitted_past_the_process_cap() -> None:
    """A right answer that arrives while a hostile one holds the only process is graded,
    not timed out in the queue (the pool evicts the hostile job: its deadline counts its
    own CPU time, never time spent waiting)."""
    with GradingPool(workers=1, timeout=5.0, max_processes=1) as pool:
        assert pool.compare("2", "2").correct
        finished: list[str] = []

        def submit(label: str, answer: str, timeout: float) -> None:
            finished.append(f"{label}:{pool.compare(answer, '1', timeout=timeout).status}")

        first = threading.Thread(target=submit, args=("first", POWER_TOWER, 3.0))
        first.start()
        time.sleep(0.3)  # the power tower holds the only process
        submit("queued", "1", 0.5)
        first.join()
    assert finished == ["queued:graded", "first:timeout"]


def test_replacing_a_killed_worker_does_not_start_an_interpreter() -> None:
    with GradingPool(workers=1, timeout=1.0) as pool:
        assert pool.compare("3", "3.0").correct
        (before,) = pool.worker_pids()
        template = _parent(before)
        assert pool.compare(POWER_TOWER, "1").status == "timeout"
        assert pool.compare("4", "4.0").correct
        (after,) = pool.worker_pids()
        # workers are forked from one template process that imported sympy once
        assert after != before and _parent(after) == template != os.getpid()


def test_async_grading_holds_no_thread_per_answer() -> None:
    async def main() -> tuple[list[bool], int]:
        with GradingPool(workers=2, timeout=10.0) as pool:
            await pool.acompare("1", "1.0")
            baseline = threading.active_count()
            tasks = [asyncio.ensure_future(agrade(rf"\boxed{{{i}/4}}", str(i / 4), pool=pool)) for i in range(24)]
            await asyncio.sleep(0)
            peak = threading.active_count()
            grades = await asyncio.gather(*tasks)
            return [g.correct for g in grades], peak - baseline

    correct, extra_threads = asyncio.run(main())
    assert correct == [True] * 24
    assert extra_threads == 0


def test_math_env_astep_grades_through_the_pool() -> None:
    env = gem.make("eval:MATH500")
    env.reset(idx=0)
    _, reward, terminated, _, info = asyncio.run(env.astep(r"$\boxed{(3, \frac{\pi}{2})}$"))
    assert (reward, terminated, info["correct"]) == (1.0, True, True)
