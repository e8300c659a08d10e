"""Code envs stepped from several threads at once (gem.vector.ThreadVectorEnv, gem audit --jobs): found by
`gem audit code:MBPP` with lanes in threads, where the reference solutions scored 0.125 instead of 0.969.

Sandboxed processes die with the *thread* that started them (bwrap's --die-with-parent is the kernel's
parent-death signal): warm zygotes were started from whichever thread asked for a run, so when one stepping thread
ended, the zygotes (and resident judges) it had started died under the other instances' runs ('the test harness
failed', 'killed by signal 9'). Zygotes now start from one thread kept for the process's life
(gem-tools' ``warm._spawner``; ``tests/test_warm_lifetime.py`` there)."""

from __future__ import annotations

import threading

import gem


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
