"""Code envs stepped from several threads at once (gem.vector.ThreadVectorEnv, gem audit --jobs): found by
`gem audit code:MBPP` with lanes in threads, where the reference solutions scored 0.125 instead of 0.969."""

from __future__ import annotations

import threading

import pytest

import gem


@pytest.mark.xfail(reason="open: sandboxed processes die with the thread that forked them (PR_SET_PDEATHSIG, "
                          "bwrap --die-with-parent), and resident judges are shared by every instance of the "
                          "process: when one stepping thread ends, the judges it forked die under the others "
                          "('the test harness failed', 'killed by signal 9')", strict=False)
def test_reference_solutions_pass_when_instances_are_stepped_from_several_threads():
    """Pins the wrong rewards of honest answers under threads: every reference solution must still pass."""
    envs = [gem.make("eval:MBPP") for _ in range(4)]
    failures: list[tuple[int, str]] = []

    def play(env, first: int) -> None:
        for seed in range(first, first + 4):
            env.reset(seed=seed)
            right, _ = env.audit_answers()
            _, reward, _, _, info = env.step(right)
            if reward != 1.0:
                failures.append((seed, str(info.get("first_failure"))))

    threads = [threading.Thread(target=play, args=(env, 4 * k)) for k, env in enumerate(envs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for env in envs:
        env.close()
    assert failures == []
