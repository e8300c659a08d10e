"""The supervised pool: overrunning grades are killed, dead workers replaced, callers
never hang, and hostile answers cannot take the grader down."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator

import pytest

from gem_envs_math.grading import MAX_ANSWER_CHARS, agrade, grade
from gem_envs_math.pool import GradingPool, shared_pool

POWER_TOWER = "9^{9^{9^9}}"


@pytest.fixture(scope="module")
def pool() -> Iterator[GradingPool]:
    with GradingPool(workers=2, timeout=0.5) as pool:
        yield pool


#: a CPU budget for honest comparisons on the fixture pool that no honest answer comes near
HONEST = 30.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child not yet reaped is a zombie: count it as dead
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether ``pid`` is dead within ``within`` seconds: a killed worker is SIGKILLed and
    not waited for (the scheduler does not block on it), and a process that grew to
    gigabytes takes a moment to be torn down."""
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_power_tower_is_killed_and_the_worker_replaced(pool: GradingPool) -> None:
    assert pool.compare("2", "2.0", timeout=HONEST).correct  # starts a worker
    before = set(pool.worker_pids())
    restarts = pool.restarts
    verdict = pool.compare(POWER_TOWER, "1")
    assert (verdict.correct, verdict.status) == (False, "timeout")
    assert pool.restarts == restarts + 1
    # the killed worker is gone, and the pool still grades
    assert pool.compare(r"\frac{1}{2}", "0.5", timeout=HONEST).correct
    killed = before - set(pool.worker_pids())
    assert all(_gone(pid) for pid in killed)


def test_a_dying_worker_is_a_crash_not_a_hang(pool: GradingPool) -> None:
    outcome = pool.call("os:_exit", 3)
    assert outcome.status == "crashed"
    assert pool.compare("3", "3", timeout=HONEST).correct


def test_a_raising_job_is_reported(pool: GradingPool) -> None:
    outcome = pool.call("math:sqrt", -1)
    assert outcome.status == "error" and "ValueError" in outcome.value
    assert pool.call("math:sqrt", 4.0).value == 2.0


def test_workers_have_a_memory_limit(pool: GradingPool) -> None:
    outcome = pool.call("builtins:bytearray", 16 * 1024**3)
    assert outcome.status == "error" and "MemoryError" in outcome.value


@pytest.mark.parametrize(
    "response",
    [
        rf"\boxed{{{POWER_TOWER}}}",
        r"\boxed{9^{9^{9^{9^{9^9}}}}}",
        r"\boxed{10^{10^{10^{10}}}!}",
        r"\boxed{" + "(" * 900 + "1" + ")" * 900 + "}",
        r"\boxed{" + "{" * 900 + "1" + "}" * 900 + "}",
        r"\boxed{" + r"\frac{1}{" * 150 + "2" + "}" * 150 + "}",
        r"\boxed{\frac{1}{}\sqrt[}{\begin{pmatrix}&&\\\end{}}",
        r"\boxed{\left(\right.\right)\left[}",
        r"\boxed{" + "x+" * 600 + "1}",
        "\\boxed{" + "\x00\ud800\u202e" * 50 + "}",
    ],
)
def test_adversarial_answers_are_wrong_within_the_bound(pool: GradingPool, response: str) -> None:
    result = grade(response, "1", pool=pool)
    assert not result.correct
    assert result.status in {"graded", "timeout", "memory", "crashed"}
    assert pool.compare("5", "5", timeout=HONEST).correct  # the pool survives


def test_megabyte_answers() -> None:
    long_box = r"\boxed{" + "1" * 1_000_000 + "}"
    assert grade(long_box, "1").status == "too_long"
    assert grade("9" * 1_000_000, "9").status == "no_answer"
    assert grade("word " * 200_000 + r"\boxed{42}", "42").correct
    assert len(grade(long_box, "1").extracted or "") < MAX_ANSWER_CHARS


def test_lists_of_references() -> None:
    assert grade(r"\boxed{B}", ["A", "B"]).correct
    assert not grade(r"\boxed{C}", ["A", "B"]).correct


def test_threads_share_one_pool_without_mixing_replies() -> None:
    # each thread checks its own answers: a reply delivered to the wrong caller would
    # show up as a wrong verdict
    pool = shared_pool()
    errors: list[str] = []

    def work(offset: int) -> None:
        for i in range(15):
            n = offset * 100 + i
            if not grade(rf"\boxed{{{n}}}", str(n)).correct or grade(rf"\boxed{{{n + 1}}}", str(n)).correct:
                errors.append(f"thread {offset}, answer {n}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert shared_pool() is pool


def test_timeouts_from_many_threads_do_not_starve_the_pool(pool: GradingPool) -> None:
    results: list[str] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        status = pool.compare(POWER_TOWER if i % 2 else str(i), str(i)).status
        with lock:
            results.append(status)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["graded"] * 3 + ["timeout"] * 3
    assert pool.compare("7", "7", timeout=HONEST).correct


def test_async_grading_runs_concurrently() -> None:
    async def main() -> list[bool]:
        tasks = [agrade(rf"\boxed{{{i}/2}}", str(i / 2)) for i in range(20)]
        return [g.correct for g in await asyncio.gather(*tasks)]

    assert asyncio.run(main()) == [True] * 20


def test_closed_pool_refuses_work() -> None:
    pool = GradingPool(workers=1)
    assert pool.compare("1", "1").correct
    pids = pool.worker_pids()
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.compare("1", "1")
    assert all(_gone(pid) for pid in pids)


def test_a_worker_that_cannot_start_is_an_error_not_a_hang() -> None:
    with GradingPool(workers=1, preload=("gem_envs_math_no_such_module",)) as pool:
        with pytest.raises(RuntimeError, match="exited with code 1"):
            pool.compare("1", "1")


def test_unpicklable_arguments_are_an_error_of_the_job(pool: GradingPool) -> None:
    outcome = pool.call("builtins:len", lambda: None)
    assert outcome.status == "error" and "cannot be sent" in outcome.value
    assert pool.compare("1", "1").correct


def test_failures_carry_the_env_hosts_names_and_words(pool: GradingPool) -> None:
    """A timed-out job and one whose worker died report what the env host reports for a call
    that overran or lost its worker (issue 38: one vocabulary), and say so in their value."""
    from gem.host.failures import STEP_TIMEOUT, WORKER_DIED

    timed_out = pool.call("builtins:eval", "[0 for _ in iter(int, 1)]", timeout=0.3)
    assert (timed_out.status, timed_out.failure) == ("timeout", STEP_TIMEOUT)
    assert "grading did not return within 0.3 s of its own CPU time" in timed_out.value
    died = pool.call("os:_exit", 3)
    assert (died.status, died.failure) == ("crashed", WORKER_DIED) and "worker died" in died.value
    assert pool.call("math:sqrt", 9.0).failure is None


def test_a_truthy_reply_that_is_not_true_is_not_a_correct_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A comparison is correct only when its worker replies JSON ``true``: a worker that replies
    ``"false"`` (or any truthy non-bool, as a worker running the answer's code could) was read
    as correct by ``bool(value)``."""
    from gem_envs_math import pool as pool_module

    monkeypatch.setattr(pool_module, "_EQUIVALENT", "builtins:max")  # replies max("false", "1") == "false"
    with GradingPool(workers=1, timeout=5.0, preload=()) as replies_text:
        verdict = replies_text.compare("false", "1")
        assert (verdict.correct, verdict.status) == (False, "graded")


def test_the_template_runs_the_workers_module_and_the_reply_is_json(pool: GradingPool) -> None:
    """The grading template is ``python -m gem_envs_math.workers`` (the worker lifecycle lives
    there, the scheduler in pool.py), and what a worker sends back is read as JSON only."""
    from gem_envs_math import workers

    assert pool.compare("1", "1").correct  # the template runs
    assert pool._template is not None and "gem_envs_math.workers" in pool._template.process.args
    with pytest.raises(ValueError):
        workers.parse_reply(b"\x80\x04K\x01.")  # a pickle of 1
    assert workers.parse_reply(b"[true, 1]") == (True, 1)
