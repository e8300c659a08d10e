"""``gem.runner.run(..., processes=N)``: envs in worker processes, their calls concurrent inside each."""

from __future__ import annotations

import threading
import time

from gem.runner import run
from gem.testing.envs import BarrierEnv, CountEnv


class OneCallAtATimeEnv(CountEnv):
    """Raises if two of its calls ever run at once; a step told "slow" takes 2 s."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.inside = 0
        self.lock = threading.Lock()

    def _enter(self):
        with self.lock:
            self.inside += 1
            if self.inside > 1:
                raise RuntimeError("two calls ran at once on one env")

    def _leave(self):
        with self.lock:
            self.inside -= 1

    def reset(self, seed=None, **kwargs):
        self._enter()
        try:
            return super().reset(seed, **kwargs)
        finally:
            self._leave()

    def step(self, action):
        self._enter()
        try:
            if action == "slow":
                time.sleep(2.0)
            return super().step(action)
        finally:
            self._leave()


def wrong(observation):
    return "\\boxed{0}"


def test_blocking_envs_overlap_inside_one_worker_process():
    # 32 envs in one worker: before, a worker ran the calls it was sent one after another and
    # this barrier broke at its timeout
    barrier = threading.Barrier(32, timeout=60)
    trajs = run(lambda: BarrierEnv(barrier, high=10**6, max_turns=3), wrong, seeds=range(32), concurrency=32,
                processes=1)
    assert [t.error for t in trajs] == [None] * 32
    assert all(len(t) == 3 for t in trajs)


def test_every_call_in_flight_when_a_worker_dies_fails_and_the_run_goes_on(count_registry):
    async def act(observation, context):
        return "die" if context.index == 0 and context.turn == 1 else "\\boxed{1}"

    trajs = run("test:Faulty-v0", act, seeds=range(12), concurrency=4, processes=1, on_error="record")
    assert "WorkerDied" in trajs[0].error
    assert all(t.error is None or "WorkerDied" in t.error or "EpisodeLost" in t.error for t in trajs[1:])
    assert sum(t.error is None for t in trajs) >= 8  # the episodes started after the restart


def test_an_env_whose_episode_gave_up_on_a_call_finishes_it_before_the_next():
    async def act(observation, context):
        return "slow" if context.index == 0 else "\\boxed{0}"

    # episode 0 stops waiting for its slow step; episode 1 gets the same env (one slot) and its
    # reset must wait for that step to end, never run beside it
    trajs = run(lambda: OneCallAtATimeEnv(high=10, max_turns=2), act, seeds=range(3), concurrency=1, processes=1,
                episode_timeout=1.5, on_error="record")
    assert trajs[0].error.startswith("EpisodeTimeoutError")
    assert [t.error for t in trajs[1:]] == [None, None]
    assert all(len(t) == 2 for t in trajs[1:])


def test_a_bad_env_factory_says_so_at_the_start():
    import pytest

    from gem.errors import VectorEnvError

    def broken():
        raise ValueError("no such level")

    with pytest.raises(VectorEnvError, match="no such level"):
        run(broken, wrong, seeds=range(2), concurrency=2, processes=1)
