"""``gem.runner.run(..., processes=N)``: envs in worker processes, their calls concurrent inside each."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

from gem.runner import run
from gem.testing.envs import BarrierEnv, CountEnv, DriftingEnv, FaultyEnv


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


class SlowFaultyEnv(FaultyEnv):
    """:class:`FaultyEnv` whose steps block 0.3 s, so that its siblings' steps run beside the one that dies."""

    def step(self, action):
        if action != "die":
            time.sleep(0.3)
        return super().step(action)


def _turns(traj):
    return [(t.observation, t.action, t.reward, t.terminated, t.truncated) for t in traj.turns]


def test_only_the_call_that_killed_a_worker_fails_and_its_siblings_go_on_from_their_state():
    async def act(observation, context):
        return "die" if context.index == 0 and context.turn == 1 else "\\boxed{1}"

    # four envs in one worker, three of them inside a step when the fourth's kills it: which call did is
    # found by running them again one at a time in a fresh worker, each env back at its state
    trajs = run(SlowFaultyEnv, act, seeds=range(8), concurrency=4, processes=1, on_error="record")
    twin = run(SlowFaultyEnv, lambda observation: "\\boxed{1}", seeds=range(8), concurrency=4)
    assert "WorkerDied" in trajs[0].error and len(trajs[0].turns) == 1
    assert [t.error for t in trajs[1:]] == [None] * 7
    assert [_turns(t) for t in trajs[1:]] == [_turns(t) for t in twin[1:]]


class DriftingFaultyEnv(DriftingEnv):
    """:class:`DriftingEnv` (its replays answer otherwise) that kills its process on "die"."""

    def step(self, action):
        if action == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


def test_a_sibling_whose_replay_answers_otherwise_says_its_episode_was_lost():
    turns, dying = {}, asyncio.Event()

    async def act(observation, context):
        turns[context.index] = context.turn
        if context.index == 0 and context.turn == 2:
            while turns.get(1, 0) < 2:  # env 1 answered a step since its last snapshot: it has one to replay
                await asyncio.sleep(0.01)
            dying.set()
            return "die"
        if context.index == 1 and context.turn == 2:  # its next step comes after the death
            await dying.wait()
            await asyncio.sleep(0.2)
        return "\\boxed{1}"

    trajs = run(DriftingFaultyEnv, act, seeds=range(4), concurrency=2, processes=1, on_error="record")
    assert "EpisodeLost" in trajs[1].error and "ReplayDiverged" in trajs[1].error
    assert "WorkerDied" in trajs[0].error or "EpisodeLost" in trajs[0].error
    assert [t.error for t in trajs[2:]] == [None, None]


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
