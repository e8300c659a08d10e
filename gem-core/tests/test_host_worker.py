"""The host's one worker lifecycle (:class:`gem.host.worker.Worker`) and its one culprit rerun
(:meth:`gem.host.recovery.Recovery.rerun`), under every transport that keeps envs elsewhere:
the vector process backend (calls one at a time), a run's ``processes=`` (calls side by side,
the single- and the multi-agent runner alike) and the Ray backend (actors, last in this module)."""

from __future__ import annotations

import functools
import multiprocessing
import os
import threading
import time
import types

import pytest
from test_faults import FaultyGame
from test_vector import _bounded
from test_vector_ray import ray_address  # noqa: F401  (a fixture: the module's own Ray cluster)

import gem
from gem.host.recovery import Lost, Recovery
from gem.host.worker import Worker
from gem.multiagent import run as run_games
from gem.runner import run
from gem.testing.envs import BarrierEnv, CountEnv, FaultyEnv
from gem.vector import ProcessVectorEnv


def _slots(factory, n, mode="disabled", on_error="raise"):
    return [(i, factory, f"test:{i}", mode, on_error) for i in range(n)]


class SleepyEnv(CountEnv):
    """A step told a number of seconds sleeps that long first."""

    def step(self, action):
        if action.replace(".", "").isdigit():
            time.sleep(float(action))
        return super().step("\\boxed{1}")


def test_one_worker_runs_calls_in_order_or_side_by_side_as_it_is_told():
    """``concurrency=1`` (the vector backend's workers): answers come in the order sent, even
    when the first call is the slow one; more (a run's): two steps that each wait for the other
    at a barrier both return, which one thread could never do."""
    calm = Worker(_slots(SleepyEnv, 2), "fork", concurrency=1).start()
    try:
        calm.send([(0, (0, "reset", (1, {}), {})), (1, (1, "reset", (1, {}), {}))])
        calm.send([(0, (0, "step", ("0.3",), {})), (1, (1, "step", ("0",), {}))])
        keys = []
        while len(keys) < 4:
            keys += [key for key, _ in calm.answers()[0]]
        assert keys == [0, 1, 0, 1]
    finally:
        calm.stop()
    barrier = threading.Barrier(2, timeout=20)
    busy = Worker(_slots(functools.partial(BarrierEnv, barrier), 2), "fork", concurrency=4).start()
    try:
        busy.send([(k, (k, "reset", (k, {}), {})) for k in (0, 1)] + [(k + 2, (k, "step", ("1",), {})) for k in (0, 1)])
        answers = {}
        deadline = time.monotonic() + 30
        while len(answers) < 4 and time.monotonic() < deadline:
            answers.update(busy.answers()[0])
        assert sorted(answers) == [0, 1, 2, 3]
        assert all(type(answers[k][0]) is tuple for k in (2, 3))  # real steps, not a broken barrier's failure
    finally:
        busy.stop()


def test_a_worker_that_dies_under_a_call_raises_lost_naming_it():
    worker = Worker(_slots(FaultyEnv, 1), "fork").start()
    worker.execute((0, "reset", (1, {}), {}), timeout=10)
    call = (0, "step", ("die",), {})
    with pytest.raises(Lost) as lost:
        worker.execute(call, timeout=10)
    assert lost.value.call is call and "worker process died" in lost.value.died
    assert not worker.alive()


def _exits_at_once():
    os._exit(3)


def test_every_owner_reports_a_worker_that_exits_while_starting_in_one_message():
    """The start-failure hint is written once: the vector backend and the runner say the same."""
    with pytest.raises(RuntimeError, match=r"the worker process for envs \[0\] exited with code 3 while starting"):
        ProcessVectorEnv([_exits_at_once], context="fork")
    with pytest.raises(RuntimeError, match=r"the worker process for envs \[0\] exited with code 3 while starting"):
        run(_exits_at_once, lambda observation: "x", seeds=[0], processes=1)
    worker = Worker(_slots(_exits_at_once, 1), "forkserver")
    with pytest.raises(RuntimeError, match="if __name__ == '__main__':"):
        worker.start()


@pytest.fixture
def seen(monkeypatch):
    """Which transport restarted a worker through :meth:`Recovery.rerun` (the worker's name for
    itself: "worker process", "Ray actor"), and which worker processes were started through
    :meth:`Worker.start` (their names and how many calls each runs at once)."""
    calls, started = [], []
    rerun, start = Recovery.rerun, Worker.start

    def counted(self, *args, **kwargs):
        calls.append(self.worker)
        return rerun(self, *args, **kwargs)

    def starting(self):
        started.append((self.name, self.concurrency))
        return start(self)

    monkeypatch.setattr(Recovery, "rerun", counted)
    monkeypatch.setattr(Worker, "start", starting)
    monkeypatch.setattr("gem.host.processes.default_start_method", lambda: "fork")
    return types.SimpleNamespace(reruns=calls, started=started)


def _serving(prefix: str) -> int:
    return len([c for c in multiprocessing.active_children() if c.name.startswith(prefix)])


def test_the_vector_backend_and_both_runners_run_the_one_worker_and_its_one_rerun(count_registry, seen):
    """Before, the vector backend and ``processes=`` each had a worker class and a recovery of their
    own (and the multi-agent runner had no processes): each transport now restarts a dying worker
    through the same rerun, and every worker process is the host's Worker."""
    with gem.make_vec(["test:Faulty-v0"] * 2, backend="process", backend_kwargs={"num_workers": 1},
                      on_error="reset", seed=1) as envs:
        assert _serving("gem-vector-") == 1 and seen.started == [("gem-vector", 1)]
        envs.reset()
        infos = _bounded(lambda: envs.step(["die", "\\boxed{5}"]))[4]
        assert infos[0]["error_type"] == "WorkerDied" and seen.reruns == ["worker process"]
        assert seen.started == [("gem-vector", 1)] * 2  # the fresh one, started by the rerun

    async def act(observation, context):
        assert _serving("gem-runner-") == 1
        return "die" if context.index == 0 and context.turn == 0 else "\\boxed{1}"

    trajs = run("test:Faulty-v0", act, seeds=range(4), concurrency=2, processes=1, on_error="record")
    assert "WorkerDied" in trajs[0].error and [t.error for t in trajs[1:]] == [None] * 3
    assert seen.reruns == ["worker process"] * 2
    runner = seen.started[2:]  # its first worker, and a fresh one or two (a second death names the call)
    assert len(runner) >= 2 and {name for name, _ in runner} == {"gem-runner"} and runner[0][1] > 1
    del seen.started[:]

    async def plays(observation, context):
        return "die" if context.index < 2 and context.turn == 1 else "move"

    games = run_games(FaultyGame, plays, seeds=range(3), concurrency=2, processes=1, on_error="record")
    assert "WorkerDied" in games[0].error and "WorkerDied" in games[1].error
    assert games[2].error is None and games[2].steps == 4
    assert len(seen.reruns) > 2 and set(seen.reruns) == {"worker process"}
    assert {name for name, _ in seen.started} == {"gem-runner"}


def _wait_dead(handle, timeout: float = 60.0) -> None:
    """Until the actor answers no call: ``ray.kill`` returns before the kill lands, and a step sent before it
    lands is answered by the old actor (under load, in one CI run: no rerun, and the test below failed)."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get(handle.ready.remote(), timeout=5)
        except RayActorError:
            return
        except GetTimeoutError:
            continue
        time.sleep(0.05)
    raise AssertionError(f"a Ray actor killed {timeout:.0f} s ago still answers")


def test_a_ray_actor_that_dies_is_replaced_through_the_same_rerun(count_registry, seen, ray_address):  # noqa: F811
    import ray

    with gem.make_vec(["test:Faulty-v0"] * 2, backend="ray", backend_kwargs={"num_actors": 1, "address": ray_address},
                      on_error="reset", seed=1) as envs:
        envs.reset()
        ray.kill(envs._actors[0].handle, no_restart=True)  # between calls: no call is to blame
        _wait_dead(envs._actors[0].handle)
        _bounded(lambda: envs.step(["\\boxed{5}", "\\boxed{5}"]))
        assert seen.reruns == ["Ray actor"]
