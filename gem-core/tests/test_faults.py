"""One set of fault tests for every place env calls run (the env host, :mod:`gem.host`): the
vector backends, the runner's threads and worker processes, and the multi-agent runner.

The faults: an env call that raises, one that hangs past ``step_timeout``, one whose process
exits under it (``exit``), and a worker killed from outside between calls (``killed``). The
last two only exist where envs live in workers. Each test checks which env or episode
reported the fault, and how, and that the others went on with their real results.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys

import pytest
from test_vector import _bounded
from test_vector_ray import ray_address  # noqa: F401  (a fixture: the module's own Ray cluster)

import gem
from gem.errors import VectorEnvError
from gem.multiagent import AgentSelector, MultiAgentEnv
from gem.multiagent import run as run_games
from gem.runner import run
from gem.testing.envs import FaultyEnv

IN_THIS_PROCESS = ("raise", "hang")
IN_WORKERS = ("raise", "hang", "exit", "killed")
#: the action that makes FaultyEnv fail so (``killed`` is done to the worker, not by the env)
ACTION = {"raise": "raise", "hang": "hang", "exit": "die", "killed": "\\boxed{50}"}
#: what a vector env reports for the env that failed (``info["error_type"]``)
ERROR_TYPE = {"raise": "RuntimeError", "hang": "StepTimeout", "exit": "WorkerDied", "killed": "WorkerDied"}

VECTOR_CASES = [(b, f) for b in ("sync", "thread") for f in IN_THIS_PROCESS] + \
    [(b, f) for b in ("process", "ray") for f in IN_WORKERS]


def _kill_workers(prefix: str) -> None:
    for child in multiprocessing.active_children():
        if child.name.startswith(prefix):
            child.kill()
            child.join()


#: an env with a state, which a restarted worker carries over, and one without (its episode is lost)
STATEFUL, STATELESS = "test:Faulty-v0", "test:StatelessFaulty-v0"
RUNNER_CASES = [(None, f, STATEFUL) for f in IN_THIS_PROCESS] + \
    [(1, f, env) for f in IN_WORKERS for env in (STATEFUL, STATELESS)]


def _turns(traj):
    return [(t.observation, t.action, t.reward, t.terminated, t.truncated) for t in traj.turns]


@pytest.mark.parametrize("processes, fault, env_id", RUNNER_CASES,
                         ids=lambda v: {None: "threads", 1: "processes"}.get(v, v))
def test_a_run_records_a_fault_on_its_episode_and_the_others_finish(count_registry, processes, fault, env_id,
                                                                    monkeypatch):
    count_registry.register(STATELESS, "gem.testing.envs:StatelessFaultyEnv")
    # workers fork, so they know the ids registered here: a thread an earlier test left alive
    # (a daemon winding down) would otherwise make them start from a forkserver, which does not
    monkeypatch.setattr("gem.host.processes.default_start_method", lambda: "fork")

    async def act(observation, context):
        if context.index == 0 and context.turn == 0:
            if fault == "killed":
                _kill_workers("gem-runner-")
            return ACTION[fault]
        return "\\boxed{1}"

    trajs = run(env_id, act, seeds=range(6), concurrency=2, processes=processes, step_timeout=1.0,
                on_error="record")
    twin = run(env_id, lambda observation: "\\boxed{1}", seeds=range(6), concurrency=2)
    error = trajs[0].error
    if fault == "raise":
        assert "RuntimeError" in error and "FaultyEnv was asked to raise" in error
    elif fault == "hang":
        assert error.startswith("StepTimeoutError") and not trajs[0].turns
    elif fault == "exit":  # its call killed the worker; were several running, only a restored env could say which
        assert "WorkerDied" in error or (env_id == STATELESS and "EpisodeLost" in error)
    else:  # killed between its calls: its step, if the only call sent to the dead worker, is blamed
        assert error is None or "WorkerDied" in error or (env_id == STATELESS and "EpisodeLost" in error)
    rest = trajs[1:]
    if processes is None or fault == "raise" or env_id == STATEFUL:
        # the other env of a restarted worker goes on from its state: nothing but the failing call was lost
        assert [t.error for t in rest] == [None] * len(rest)
    else:  # the other env has no state: its episode at the death is lost, and says so
        assert all(t.error is None or "EpisodeLost" in t.error for t in rest)
        assert sum(t.error is None for t in rest) >= len(rest) - 1
    for ours, theirs in zip(rest, twin[1:]):  # with their real results
        assert ours.error is not None or _turns(ours) == _turns(theirs)
    assert all(t.done for t in rest if t.error is None)


class FaultyGame(MultiAgentEnv):
    """Two agents take turns; an action "raise" raises, "hang" blocks (as FaultyEnv's), "die" kills
    its process; the game ends after four moves."""

    def __init__(self) -> None:
        super().__init__()
        self.possible_agents = ["a", "b"]
        self.agent_selector = AgentSelector(self.possible_agents, mode="sequential")
        self.moves = 0

    def reset(self, seed=None, **kwargs):
        self.moves = 0
        return super().reset(seed)

    def observe(self, agent):
        return f"move {self.moves}"

    def _process_actions(self, actions):
        ((agent, action),) = actions.items()
        if action == "raise":
            raise RuntimeError("FaultyGame was asked to raise")
        if action == "hang":
            FaultyEnv.hung.wait(3600)
        if action == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        self.moves += 1
        if self.moves >= 4:
            self.terminations = {name: True for name in self.agents}
        return {agent: self.observe(agent)}, {agent: 1.0}, self.terminations, self.truncations, {}

    def game_state(self):
        return {"moves": self.moves}

    def load_game_state(self, state):
        self.moves = state["moves"]


@pytest.mark.parametrize("processes, fault", [(None, f) for f in IN_THIS_PROCESS] + [(1, f) for f in IN_WORKERS],
                         ids=lambda v: {None: "threads", 1: "processes"}.get(v, v))
def test_a_multiagent_run_records_a_fault_on_its_game_and_the_others_finish(processes, fault, monkeypatch):
    """Games in the run's threads, and (``processes=``, which the multi-agent runner gains from the runner's
    orchestration) in a worker process that also dies or is killed: the others go on from their state."""
    monkeypatch.setattr("gem.host.processes.default_start_method", lambda: "fork")

    async def act(observation, context):
        if context.index == 0 and context.turn == 0:
            if fault == "killed":
                _kill_workers("gem-runner-")
            return ACTION[fault]
        return "move"

    games = run_games(FaultyGame, act, seeds=range(5), concurrency=2, step_timeout=1.0, on_error="record",
                      processes=processes)
    if fault == "raise":
        assert "RuntimeError: FaultyGame was asked to raise" in games[0].error
    elif fault == "hang":
        assert games[0].error.startswith("StepTimeoutError")
    elif fault == "exit":
        assert "WorkerDied" in games[0].error
    else:  # killed between its calls: its move, if the only call sent to the dead worker, is blamed
        assert games[0].error is None or "WorkerDied" in games[0].error
    assert [g.error for g in games[1:]] == [None] * 4
    assert all(g.steps == 4 and g.returns == {"a": 2.0, "b": 2.0} for g in games[1:])


# last in this module: once the Ray cases start Ray, its threads make worker processes use
# forkserver, which knows none of the ids a test registers, until the module's cluster stops
IDS = ["test:Count-v0-hard", "test:Faulty-v0", "test:Count-v0-hard"]
#: what the error says of the env that failed, beside its type
SAYS = {("raise", "sync"): "FaultyEnv was asked to raise", ("hang", "sync"): "did not return within",
        ("exit", "process"): "worker process died", ("exit", "ray"): "Ray actor died",
        ("killed", "process"): "worker process died"}


def _make_vec(request, backend: str, **kwargs):
    # one worker holds every env, so a dying or killed one takes the siblings' state with it
    backend_kwargs = {"process": {"num_workers": 1}, "ray": {"num_actors": 1}}.get(backend, {})
    if backend == "ray":
        backend_kwargs["address"] = request.getfixturevalue("ray_address")
    return gem.make_vec(IDS, backend=backend, backend_kwargs=backend_kwargs, step_timeout=1.0, seed=3, **kwargs)


def _fail(envs, backend: str, fault: str) -> int | None:
    """Set up ``fault``; the index of the env that is to report it: the one told to fail, or,
    for a worker killed between calls, the first call it is sent (it cannot say which one it
    ran; a Ray actor's calls are run again instead, and none fails)."""
    if fault != "killed":
        return 1
    if backend == "process":
        _kill_workers("gem-vector-")
        return 0
    import ray

    ray.kill(envs._actors[0].handle, no_restart=True)
    return None


def _says(fault: str, backend: str) -> str:
    return SAYS.get((fault, backend), SAYS.get((fault, "sync"), ""))


@pytest.mark.parametrize("backend, fault", VECTOR_CASES)
def test_under_on_error_reset_a_vector_env_reports_a_fault_on_its_env_and_the_others_go_on(
        request, count_registry, backend, fault):
    with _make_vec(request, backend, on_error="reset") as envs, \
            gem.make_vec(IDS, backend="sync", seed=3, on_error="reset") as twin:
        assert envs.reset() == twin.reset()
        actions = ["\\boxed{50}", ACTION[fault], "\\boxed{50}"]
        culprit = _fail(envs, backend, fault)
        obs, rewards, terminated, truncated, infos = _bounded(lambda: envs.step(actions))
        others = [i for i in range(3) if i != culprit]
        expected = twin.step({i: actions[i] for i in others})
        for k, i in enumerate(others):
            assert (obs[i], rewards[i], infos[i]) == (expected[0][k], expected[1][k], expected[4][k])
        if culprit is not None:
            assert truncated[culprit] and not terminated[culprit] and rewards[culprit] == 0
            assert infos[culprit]["error_type"] == ERROR_TYPE[fault]
            assert _says(fault, backend) in infos[culprit]["error"]
            assert obs[culprit].startswith("Guess")  # a fresh episode on a fresh env
        _bounded(lambda: envs.step(["\\boxed{5}"] * 3))  # every env keeps working


@pytest.mark.parametrize("backend, fault", VECTOR_CASES)
def test_under_on_error_raise_a_vector_env_names_the_env_that_failed_and_keeps_the_others_results(
        request, count_registry, backend, fault):
    with _make_vec(request, backend) as envs, gem.make_vec(IDS, backend="sync", seed=3) as twin:
        envs.reset(), twin.reset()
        actions = ["\\boxed{50}", ACTION[fault], "\\boxed{50}"]
        culprit = _fail(envs, backend, fault)
        others = [i for i in range(3) if i != culprit]
        expected = twin.step({i: actions[i] for i in others})
        if culprit is None:
            answers = _bounded(lambda: envs.step(actions))
            assert [part.tolist() if hasattr(part, "tolist") else part for part in answers] == \
                [part.tolist() if hasattr(part, "tolist") else part for part in expected]
        else:
            with pytest.raises(VectorEnvError, match=rf"env {culprit} \({IDS[culprit]}\) raised "
                               rf"{ERROR_TYPE[fault]}: .*{_says(fault, backend)}") as caught:
                _bounded(lambda: envs.step(actions))
            err = caught.value
            assert err.index == culprit and err.env_id == IDS[culprit]
            assert set(err.failures) == {culprit} and err.failures[culprit].type == ERROR_TYPE[fault]
            assert set(err.results) == set(others)
            for k, i in enumerate(others):  # a dict step answers in the dict's order
                assert err.results[i] == tuple(part[k] for part in expected)
        # the healthy envs went on from that step: their next step matches the twin's
        assert envs.step({2: "\\boxed{25}"})[0] == twin.step({2: "\\boxed{25}"})[0]


# -- the hosted env (gem.host.hosted): what the framework adapters and `gem serve` step through --
@pytest.fixture(autouse=True)
def _hosted_threads_end_with_the_test():
    """The hosted envs' shared threads live as long as the process; here they end with each test, so that
    later tests' worker processes fork (a process with other threads starts them from a forkserver, which
    knows none of the ids a test registers)."""
    yield
    from gem.host.hosted import close_threads

    FaultyEnv.hung.set()  # a call hung on purpose returns, and its thread can end
    close_threads()


HOSTED_CASES = [("thread", f) for f in IN_THIS_PROCESS] + [(h, f) for h in ("process", "ray") for f in ("raise", "hang",
                                                                                                       "exit")]


def _hosted(request, host: str, **kwargs):
    from gem.host.hosted import HostedEnv

    backend_kwargs = {"address": request.getfixturevalue("ray_address")} if host == "ray" else {}
    return HostedEnv(FaultyEnv, host=host, step_timeout=1.0, backend_kwargs=backend_kwargs, **kwargs)


@pytest.mark.parametrize("host, fault", HOSTED_CASES)
def test_a_hosted_env_ends_only_the_failing_episode_truncated_and_names_the_cause(request, host, fault):
    """A step that raises, hangs past step_timeout or kills its worker ends that episode
    (truncated, reward 0, info["failure"] naming the cause) instead of raising into the caller's
    loop; the next episode on the same handle plays as a fresh env would."""
    twin = FaultyEnv()
    with _hosted(request, host) as env:
        assert env.reset(seed=3) == twin.reset(seed=3)
        assert env.step("\\boxed{5}") == twin.step("\\boxed{5}")
        obs, reward, terminated, truncated, info = _bounded(lambda: env.step(ACTION[fault]))
        assert (reward, terminated, truncated) == (0.0, False, True) and env.done
        # a lone env in a Ray actor has no snapshot to rerun its call from: its episode is lost with the actor
        kinds = {ERROR_TYPE[fault], "EpisodeLost"} if (host, fault) == ("ray", "exit") else {ERROR_TYPE[fault]}
        assert info["failure"]["type"] in kinds and env.failure == info["failure"]
        assert env.reset(seed=4) == twin.reset(seed=4)
        assert env.step("\\boxed{6}") == twin.step("\\boxed{6}")
        assert env.failure is None


def test_a_hosted_env_whose_reset_fails_reports_it_and_its_steps_end_at_once():
    from gem.host.hosted import HostedEnv

    with HostedEnv(lambda: FaultyEnv(fail_unseeded_resets=True), step_timeout=1.0) as env:
        obs, info = env.reset()
        assert obs == "" and info["failure"] == {"type": "RuntimeError",
                                                 "message": "FaultyEnv could not build an episode"}
        assert env.done and env.step("\\boxed{1}")[1:4] == (0.0, False, True)
        assert env.reset(seed=1) == FaultyEnv().reset(seed=1)


def test_hosted_envs_hang_one_at_a_time_under_asyncio():
    """Many episodes at once on one event loop (a framework's rollout): the one that hangs ends
    truncated after its step timeout, the others finish with the results of a fresh env."""
    import asyncio

    from gem.host.hosted import HostedEnv

    async def episode(k):
        env = HostedEnv(FaultyEnv, step_timeout=1.0)
        try:
            await env.areset(seed=k)
            return await env.astep("hang" if k == 0 else "\\boxed{5}")
        finally:
            env.close()

    async def main():
        return await asyncio.gather(*(episode(k) for k in range(12)))

    results = _bounded(lambda: asyncio.run(main()))
    assert results[0][4]["failure"]["type"] == "StepTimeout"
    for k, result in enumerate(results[1:], start=1):
        twin = FaultyEnv()
        twin.reset(seed=k)
        assert result == twin.step("\\boxed{5}")


@pytest.mark.parametrize("host", ["process", "ray"])
def test_hosted_envs_in_workers_are_kept_for_the_next_episode_of_the_same_env(request, host):
    """A worker process or Ray actor takes seconds to start: `hosted` keeps it between episodes
    (the next block with the same env and settings takes it), and a block whose env failed still
    hands a working env to the next one."""
    from gem.factory import EnvFactory
    from gem.host.hosted import close_idle, hosted

    backend_kwargs = {"address": request.getfixturevalue("ray_address")} if host == "ray" else {}
    make = EnvFactory("test:Faulty-v0", entry_point="gem.testing.envs:FaultyEnv")  # known in a fresh worker
    try:
        with hosted(make, host=host, step_timeout=1.0, backend_kwargs=backend_kwargs) as env:
            first = env
            env.reset(seed=1)
            assert env.step("raise")[4]["failure"]["type"] == "RuntimeError"
        with hosted(make, host=host, step_timeout=1.0, backend_kwargs=backend_kwargs) as env:
            assert env is first and env.reset(seed=1) == FaultyEnv().reset(seed=1)
        with hosted(make, host=host, step_timeout=2.0, backend_kwargs=backend_kwargs) as other:
            assert other is not first  # other settings, another worker
    finally:
        close_idle()  # no worker outlives the test


class _AsyncEnv(FaultyEnv):
    """FaultyEnv whose reset and step are its own coroutines, run where they are awaited (as an env
    awaiting a subprocess or a server); its steps record the thread they ran in."""

    threads: list[int] = []

    async def areset(self, seed=None, **kwargs):
        return self.reset(seed, **kwargs)

    async def astep(self, action):
        import asyncio
        import threading

        _AsyncEnv.threads.append(threading.get_ident())
        if action == "hang":
            await asyncio.sleep(3600)
        return self.step(action)


@pytest.mark.parametrize("fault", ["raise", "hang"])
def test_a_hosted_env_with_its_own_coroutines_runs_them_on_the_callers_loop_under_the_timeout(fault):
    """An env with a native astep keeps running on the caller's event loop (its subprocesses or
    connections belong to that loop), bounded by the same step timeout and failing the same way."""
    import asyncio
    import threading

    from gem.host.hosted import HostedEnv

    async def main():
        env = HostedEnv(_AsyncEnv, step_timeout=1.0)
        try:
            assert await env.areset(seed=2) == FaultyEnv().reset(seed=2)
            failed = await env.astep(fault)
            again = await env.areset(seed=3), await env.astep("\\boxed{4}")
            return failed, again
        finally:
            env.close()

    _AsyncEnv.threads = []
    (obs, reward, terminated, truncated, info), again = _bounded(lambda: asyncio.run(main()))
    assert (reward, terminated, truncated) == (0.0, False, True)
    assert info["failure"]["type"] == {"raise": "RuntimeError", "hang": "StepTimeout"}[fault]
    twin = FaultyEnv()
    assert again == (twin.reset(seed=3), twin.step("\\boxed{4}"))
    assert len(set(_AsyncEnv.threads)) == 1 and _AsyncEnv.threads[0] != threading.get_ident()  # the loop's thread


class _SharedChildEnv(FaultyEnv):
    """Forks, on first use, one helper process for every env of the process, tied to the forking thread
    (PR_SET_PDEATHSIG, as bwrap --die-with-parent: gem-envs-code's judges and zygote), and pays only
    while it lives."""

    helper = None

    def reset(self, seed=None, **kwargs):
        if _SharedChildEnv.helper is None:
            import ctypes
            import signal
            import subprocess

            libc = ctypes.CDLL(None, use_errno=True)
            _SharedChildEnv.helper = subprocess.Popen(["sleep", "60"], preexec_fn=lambda: libc.prctl(1, signal.SIGKILL))
        return super().reset(seed, **kwargs)

    def step(self, action):
        import time

        obs, reward, terminated, truncated, info = super().step(action)
        time.sleep(0.05)  # a killed helper is reaped at once; give the signal a moment
        return obs, reward if _SharedChildEnv.helper.poll() is None else -1.0, terminated, truncated, info


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_hosted_env_closing_does_not_end_the_thread_that_forked_what_other_envs_share():
    """Pins per-handle threads: each hosted env ran its calls in a thread of its own, which ended when it
    closed, and a process it had forked for every env (a code env's judge) died with it: the next env's
    honest answer scored as if its test harness failed."""
    import asyncio

    from gem.host.hosted import HostedEnv

    async def episode(seed):
        env = HostedEnv(_SharedChildEnv, step_timeout=5.0)
        try:
            await env.areset(seed=seed)
            return (await env.astep("\\boxed{5}"))[1]
        finally:
            env.close()

    try:
        rewards = [asyncio.run(episode(seed)) for seed in range(3)]  # one after another: each closes first
    finally:
        _SharedChildEnv.helper.kill()
        _SharedChildEnv.helper.wait()
        _SharedChildEnv.helper = None
    assert -1.0 not in rewards
