"""The pool under overload: a grade depends on the answer alone, never on what else is in
flight. Deadlines count the answer's own CPU time, new answers are admitted past the
process cap, a grade deferred by load is retried, and the workers stay within a memory
budget. No test asserts a latency: on a loaded machine only correctness is stable."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gem_envs_math.pool import GradingPool, Outcome, Verdict

POWER_TOWER = "9^{9^{9^9}}"
#: a budget hostile answers never spend while a test runs: they stay in flight
IN_FLIGHT = 600.0
HONEST = [
    (r"\frac{18}{2}", "9"),
    (r"\frac{1}{2}", "0.5"),
    (r"2\sqrt{2}", r"\sqrt{8}"),
    (r"\{3, 2, 1\}", r"\{1,2,3\}"),
    ("50\\%", "0.5"),
    (r"\dfrac{3}{4}", "0.75"),
]


def _work(cpu_seconds: float) -> range:
    """Arguments for ``builtins:sum`` that take about ``cpu_seconds`` of CPU: a stand-in
    for an honest answer that needs several slices, measured here rather than assumed."""
    probe = 2_000_000
    started = time.process_time()
    sum(range(probe))
    per_item = max(time.process_time() - started, 1e-6) / probe
    return range(int(cpu_seconds / per_item))


async def _close_with(pool: GradingPool, hostile: list[asyncio.Future[Verdict]]) -> None:
    pool.close()  # the hostile answers still in flight end "crashed"
    await asyncio.gather(*hostile)


def _workers(template: int) -> list[int]:
    """Pids of ``template``'s children: the pool's workers."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                if int(stat.read().rsplit(b")", 1)[1].split()[1]) == template:
                    children.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue  # it exited while being read
    return children


def _workers_rss(template: int) -> int:
    """Summed RSS of the pool's workers, read from /proc."""
    total = 0
    for pid in _workers(template):
        try:
            with open(f"/proc/{pid}/statm", "rb") as statm:
                total += int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
    return total


async def _until_processes(pool: GradingPool, count: int, within: float = 30.0) -> None:
    """Wait until ``pool`` has ``count`` worker processes (or ``within`` seconds passed)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        template = pool._template
        if template is not None and len(_workers(template.process.pid)) >= count:
            return
        await asyncio.sleep(0.05)


def test_honest_answers_are_graded_right_while_100_hostile_ones_are_in_flight() -> None:
    cap = 8

    async def main() -> list[Verdict]:
        pool = GradingPool(workers=2, timeout=2.0, max_processes=cap)
        hostile = [asyncio.ensure_future(pool.acompare(POWER_TOWER, "1", timeout=IN_FLIGHT)) for _ in range(100)]
        try:
            await _until_processes(pool, cap)  # every process the cap allows holds a hostile answer
            return await asyncio.gather(*(pool.acompare(answer, reference) for answer, reference in HONEST))
        finally:
            await _close_with(pool, hostile)

    verdicts = asyncio.run(main())
    assert [(v.correct, v.status) for v in verdicts] == [(True, "graded")] * len(HONEST)


def test_the_deadline_counts_cpu_time_not_time_spent_paused() -> None:
    work = _work(0.15)  # an honest job of several slices, with twice that as its budget

    async def main() -> Outcome:
        pool = GradingPool(workers=1, timeout=0.3)
        hostile = [asyncio.ensure_future(pool.acompare(POWER_TOWER, "1", timeout=IN_FLIGHT)) for _ in range(4)]
        await asyncio.sleep(0.2)
        try:
            # it shares one worker with four hostile answers: paused far longer than 0.3 s
            return await pool.acall("builtins:sum", work)
        finally:
            await _close_with(pool, hostile)

    outcome = asyncio.run(main())
    assert (outcome.status, outcome.value) == ("ok", sum(work))


def test_a_grade_deferred_by_load_is_retried_not_scored_zero() -> None:
    work = _work(0.1)  # several slices, with three times that as its budget

    async def main(pool: GradingPool) -> Outcome:
        assert (await pool.acompare("1", "1.0")).correct  # the template is up: the times below hold
        first = asyncio.ensure_future(pool.acompare(POWER_TOWER, "1", timeout=0.8))
        await asyncio.sleep(0.2)
        honest = asyncio.ensure_future(pool.acall("builtins:sum", work))
        await asyncio.sleep(0.05)  # it is still running when the next answer comes
        later = asyncio.ensure_future(pool.acompare(POWER_TOWER, "1"))
        try:
            return await honest
        finally:
            await _close_with(pool, [first, later])

    # one process: each new answer evicts the one before it, which is retried afterwards
    pool = GradingPool(workers=1, timeout=0.3, max_processes=1)
    outcome = asyncio.run(main(pool))
    assert (outcome.status, outcome.value) == ("ok", sum(work))
    assert pool.evictions >= 2  # the first power tower for it, then it for the later one


def test_a_job_that_sleeps_is_bounded_by_its_budget_too() -> None:
    with GradingPool(workers=1, timeout=0.5) as pool:
        assert pool.call("time:sleep", 600).status == "timeout"
        assert pool.compare("2", "2.0").correct


BUDGET_MB = 256
#: the pool samples its workers' memory every 25 ms: a worker can grow a little past the
#: budget before the pool sees it
SLACK_MB = 64


def test_the_workers_stay_within_the_memory_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEM_MATH_GRADER_MEMORY_BUDGET_MB", str(BUDGET_MB))
    with GradingPool(workers=2, timeout=6.0) as pool:
        assert pool.compare("1", "1.0").correct  # the template is up
        template = pool._template.process.pid  # type: ignore[union-attr]
        peak, stop = [0], threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], _workers_rss(template))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            with ThreadPoolExecutor(2) as executor:
                # each expansion grows by hundreds of MiB per CPU second
                hogs = [executor.submit(pool.compare, "(x+1)^{300000}", "1") for _ in range(2)]
                time.sleep(0.3)
                honest = pool.compare(r"\frac{18}{2}", "9")
                verdicts = [hog.result() for hog in hogs]
        finally:
            stop.set()
            sampler.join()
    assert peak[0] <= (BUDGET_MB + SLACK_MB) << 20, f"workers held {peak[0] >> 20} MiB"
    # each hog went over the budget by itself: a failure of that answer, not of the others
    assert [(v.correct, v.status) for v in verdicts] == [(False, "memory")] * 2
    assert honest.correct


def test_a_malformed_budget_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEM_MATH_GRADER_MEMORY_BUDGET_MB", "lots")
    with pytest.raises(ValueError, match="GEM_MATH_GRADER_MEMORY_BUDGET_MB='lots'"):
        GradingPool(workers=1)
