"""Issue 33's findings on the grading workers, each pinned by a test that failed on 1d88a9a.

reasoning-gym's ``score_answer`` ``eval``s the answer for several datasets, so a worker runs
the policy's code. What it sends back is parsed as data (never unpickled); a worker that ran
one answer never grades another; the template its workers fork from cannot be changed by them;
and a score outside [0, 1] is a grading failure, not a reward.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

import gem
from gem_envs_math.pool import MAX_REPLY_BYTES, GradingPool, _parse_reply

pytest.importorskip("reasoning_gym")


class _RunsOnLoad:
    """A pickle whose loading runs ``os.mkdir(path)``: proof that it ran where it was loaded."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return os.mkdir, (self.path,)


def _send_from_worker(payload: bytes) -> str:
    """An expression that, ``eval``ed in a grading worker, writes ``payload`` to the worker's
    job connection (found as the attack found it: among the objects the collector tracks)."""
    return (f"[c.send_bytes({payload!r}) for c in __import__('gc').get_objects() "
            "if type(c).__name__ == 'Connection'] and None")  # fmt: skip


def test_a_pickle_sent_back_by_a_worker_runs_nothing_in_the_host(tmp_path: Path) -> None:
    """Finding 1: the pool unpickled a worker's reply, so a crafted ``__reduce__`` ran in the
    trainer's process. Now the reply is JSON: the job fails, the worker is replaced."""
    marker = tmp_path / "ran-in-the-host"
    with GradingPool(workers=1, timeout=5.0, preload=()) as pool:
        outcome = pool.call("builtins:eval", _send_from_worker(pickle.dumps(_RunsOnLoad(str(marker)))))
        assert outcome.status == "crashed" and "malformed reply" in str(outcome.value)
        assert not marker.exists()
        assert pool.call("builtins:eval", "6 * 7").value == 42  # the pool goes on, with a fresh worker


def test_an_rg_answer_that_sends_a_pickle_scores_nothing_and_runs_nothing(tmp_path: Path) -> None:
    """Finding 1 through the env, as the attack ran: an answer to ``rg:spiral_matrix``."""
    marker = tmp_path / "ran-in-the-host"
    env = gem.make("rg:spiral_matrix")
    env.reset(idx=0)
    _, reward, *_, info = env.step("\\boxed{" + _send_from_worker(pickle.dumps(_RunsOnLoad(str(marker)))) + "}")
    assert not marker.exists()
    assert reward == 0.0 and info["grade_status"] == "crashed"


@pytest.mark.parametrize("reply", [
    pickle.dumps(_RunsOnLoad("/nonexistent/never")),
    # a pickle bomb: nested lists referenced many times over (memory, if it were ever loaded)
    b"(l" * 2000 + b"." ,
    b"[" * 100_000 + b"]" * 100_000,  # a JSON nesting bomb: recursion, bounded by the parser's guard
    b'{"ok": true}',
    b'[true]',
    b'[false, 3]',
    b'\xff\xfe',
])
def test_a_malformed_reply_is_refused_as_data(reply: bytes) -> None:
    with pytest.raises(ValueError):
        _parse_reply(reply)


def test_a_reply_over_the_size_cap_fails_its_job() -> None:
    with GradingPool(workers=1, timeout=5.0, preload=()) as pool:
        outcome = pool.call("builtins:eval", f"'x' * {MAX_REPLY_BYTES + 10}")
        assert outcome.status == "crashed"
        assert pool.call("builtins:eval", "'ok'").value == "ok"


def test_one_answer_cannot_change_a_later_grade() -> None:
    """Finding 2: an answer rebound the worker's scorer, and the worker was reused, so 5 of 5
    later wrong answers scored 1.0 (or 1e6). reasoning-gym's graders now get a fresh worker per
    job, and a score outside [0, 1] is a grading failure."""
    hostile = gem.make("rg:spiral_matrix")
    hostile.reset(idx=0)
    rebind = ("__import__('gem_envs_math.rg_score').rg_score.__dict__.__setitem__('_scorer', "
              "lambda *a: (lambda answer, entry: 1e6)) or [0]")  # fmt: skip
    for _ in range(3):  # enough to reach every worker a reused pool would hold
        hostile.step("\\boxed{" + rebind + "}")
        hostile.reset(idx=0)
    for name in ("leg_counting", "basic_arithmetic"):
        env = gem.make(f"rg:{name}")
        for idx in range(3):
            env.reset(idx=idx)
            _, reward, *_, info = env.step(r"\boxed{definitely wrong}")
            assert reward == 0.0 and not info["correct"], info
        env.reset(idx=0)
        assert env.step(rf"\boxed{{{env.answer}}}")[1] == 1.0


def test_a_score_outside_the_range_is_a_grading_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 2's 1e6: even a scorer that returns it (were a worker ever poisoned) pays nothing."""
    from gem_envs_math import rg_env
    from gem_envs_math.pool import Outcome

    class Poisoned:
        def call(self, *args: object, **kwargs: object) -> Outcome:
            return Outcome(1e6, "ok", 0.0)

    monkeypatch.setattr(rg_env, "shared_pool", lambda kind: Poisoned())
    env = gem.make("rg:leg_counting")
    env.reset(idx=0)
    _, reward, *_, info = env.step(r"\boxed{3}")
    assert reward == 0.0 and not info["correct"] and info["grade_status"] == "invalid_score"
    assert env.reward_range == (0.0, 1.0)


def test_math_workers_are_reused_and_reasoning_gym_ones_are_not() -> None:
    from gem_envs_math.pool import POOL_KINDS

    assert POOL_KINDS["math"].reuse_workers and not POOL_KINDS["reasoning_gym"].reuse_workers
    with GradingPool(workers=1, timeout=5.0, preload=()) as fresh:  # the default: a fresh worker per job
        assert not fresh.reuse_workers
        pids = {fresh.call("os:getpid").value for _ in range(4)}
        assert len(pids) == 4
    with GradingPool(workers=1, timeout=5.0) as math:  # math-verify only parses: its kind reuses
        assert math.reuse_workers
        assert len({math.call("os:getpid").value for _ in range(4)}) == 1


def test_a_worker_cannot_change_what_later_workers_inherit() -> None:
    """Finding 3 for the grading template: a worker shares its template's uid, so it could lower
    the template's hard limits, renice or re-pin it, and every later worker inherited that (a
    later worker's own setrlimit then failed: its honest grade crashed). The template now checks
    before each fork and is replaced when changed."""
    with GradingPool(workers=1, timeout=5.0, preload=()) as pool:
        nice = pool.call("os:getpriority", os.PRIO_PROCESS, 0).value
        affinity = pool.call("builtins:eval", "sorted(__import__('os').sched_getaffinity(0))").value
        tamper = ("[__import__('resource').prlimit(__import__('os').getppid(), __import__('resource').RLIMIT_AS, "
                  "(1 << 30, 1 << 30)), __import__('resource').prlimit(__import__('os').getppid(), "
                  "__import__('resource').RLIMIT_STACK, (1 << 20, 1 << 20)), "
                  "__import__('os').setpriority(__import__('os').PRIO_PROCESS, __import__('os').getppid(), 19), "
                  "__import__('os').sched_setaffinity(__import__('os').getppid(), {min(__import__('os')"
                  ".sched_getaffinity(0))})]")  # fmt: skip
        assert pool.call("builtins:eval", tamper).status == "ok"  # it did change the template
        for _ in range(2):
            assert pool.call("os:getpriority", os.PRIO_PROCESS, 0).value == nice
            assert pool.call("builtins:eval", "sorted(__import__('os').sched_getaffinity(0))").value == affinity
            limits = pool.call("builtins:eval", "[__import__('resource').getrlimit(r) for r in (__import__("
                                                "'resource').RLIMIT_AS, __import__('resource').RLIMIT_STACK)]")
            assert limits.status == "ok"
            assert limits.value[0] == [4096 << 20, 4096 << 20]  # its own memory limit was set again
            assert limits.value[1][1] != 1 << 20


def test_a_worker_cannot_read_or_write_its_templates_memory() -> None:
    """The template is not dumpable: a worker of the same uid cannot open /proc/<template>/mem
    (nor ptrace it) to plant code every later worker would inherit."""
    with GradingPool(workers=1, timeout=5.0, preload=()) as pool:
        outcome = pool.call("builtins:eval", "open('/proc/%d/mem' % __import__('os').getppid(), 'rb').close()")
        assert outcome.status == "error" and "Permission" in str(outcome.value), outcome
