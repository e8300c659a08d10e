import os
import signal
import threading
import time

import numpy as np
import pytest

import gem
from gem.errors import VectorEnvError
from gem.host import slot as slot_module
from gem.host.calls import run_remote
from gem.testing.envs import CountEnv, DriftingEnv, SlowEnv
from gem.vector.slot import NO_STATE, SNAPSHOT_BYTES, SNAPSHOT_CALLS, AutoresetMode, Slot

BACKENDS = ["sync", "thread", "process"]


def _solve(obs_list, envs):
    """The winning action for each env, read from its state (tests only)."""
    return [f"\\boxed{{{s['target']}}}" for s in envs.get_state()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_agree_on_a_seeded_run(count_registry, backend):
    ids = ["test:Count-v0-hard"] * 3
    reference = gem.make_vec(ids, seed=11, backend="sync")
    envs = gem.make_vec(ids, seed=11, backend=backend)
    with reference, envs:
        assert envs.reset() == reference.reset()
        for guess in (50, 25, 75, 60):
            a, b = envs.step([f"\\boxed{{{guess}}}"] * 3), reference.step([f"\\boxed{{{guess}}}"] * 3)
            assert a[0] == b[0] and a[4] == b[4]
            np.testing.assert_array_equal(a[1], b[1])


def test_make_vec_reference_signature_and_async_mode(count_registry):
    envs = gem.make_vec(["test:Count-v0"] * 2, wrappers=None, vec_kwargs=[{"high": 5}, {"high": 6}],
                        async_mode=True, seed=0)
    with envs:
        assert envs.backend == "thread"
        assert envs.call("high") == [5, 6]
        obs, infos = envs.reset()
        assert len(obs) == 2 and infos == [{}, {}]


def test_wrappers_apply_to_every_sub_env(count_registry):
    with gem.make_vec("test:Count-v0", num_envs=2, wrappers="concat_with_action,episode_tracking") as envs:
        envs.reset()
        _, _, _, _, infos = envs.step(["\\boxed{0}"] * 2)
        assert all(i["step"] == 1 for i in infos)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_step_autoreset_keeps_the_final_observation(count_registry, backend):
    with gem.make_vec(["test:Count-v0"] * 2, backend=backend, seed=3) as envs:
        envs.reset()
        obs, rewards, terminated, _, infos = envs.step(_solve(None, envs))
        assert rewards.tolist() == [1.0, 1.0] and terminated.all()
        assert all(i["final_obs"] == "Correct!" and i["final_info"]["correct"] for i in infos)
        assert all(o.startswith("Guess a number") for o in obs)  # already the next episode


def test_next_step_autoreset_resets_on_the_following_step(count_registry):
    with gem.make_vec(["test:Count-v0"], autoreset_mode="next_step") as envs:
        envs.reset()
        obs, rewards, terminated, _, _ = envs.step(_solve(None, envs))
        assert obs == ["Correct!"] and terminated[0]
        obs, rewards, terminated, truncated, _ = envs.step(["ignored"])
        assert obs[0].startswith("Guess") and rewards[0] == 0 and not terminated[0] and not truncated[0]


def test_disabled_autoreset_and_partial_reset(count_registry):
    with gem.make_vec(["test:Count-v0"] * 2, autoreset_mode="disabled") as envs:
        envs.reset()
        obs, _, terminated, _, infos = envs.step(_solve(None, envs))
        assert obs == ["Correct!"] * 2 and "final_obs" not in infos[0]
        obs, _ = envs.reset(indices=[1], seed=[4])
        assert len(obs) == 1 and obs[0].startswith("Guess")


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_actions_step_only_those_envs(count_registry, backend):
    with gem.make_vec(["test:Count-v0"] * 3, backend=backend) as envs:
        envs.reset()
        before = envs.call("turn")
        obs, rewards, terminated, truncated, infos = envs.step({2: "\\boxed{0}", 0: "\\boxed{0}"})
        # results in the dict's order, as in the reference package
        assert len(obs) == len(infos) == 2 and rewards.shape == terminated.shape == (2,)
        assert all(isinstance(o, str) for o in obs)
        assert envs.call("turn") == [before[0] + 1, before[1], before[2] + 1]
        with pytest.raises(IndexError):
            envs.step({7: "x"})


def test_an_env_not_stepped_when_its_worker_died_goes_on_from_its_state(count_registry):
    ids = ["test:Faulty-v0", "test:Count-v0"]
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}) as envs:
        envs.reset()
        envs.step({1: "\\boxed{0}"})
        with pytest.raises(VectorEnvError, match="worker process died"):
            envs.step({0: "die"})
        # env 1 shared the worker but was not stepped: it goes on from its state in the fresh worker
        assert envs.call("turn", indices=[1]) == [1]
        envs.reset()
        envs.step(["\\boxed{0}", "\\boxed{0}"])


def test_bad_arguments_are_named(count_registry):
    with pytest.raises(ValueError, match="autoreset_mode"):
        gem.make_vec(["test:Count-v0"], autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="unknown vector backend 'gpu'"):
        gem.make_vec(["test:Count-v0"], backend="gpu")
    with pytest.raises(gem.errors.UnknownEnvError):
        gem.make_vec(["test:Nope-v0"])
    with gem.make_vec(["test:Count-v0"] * 2) as envs, pytest.raises(ValueError, match="2 envs"):
        envs.step(["one"])


def test_async_step(count_registry):
    import asyncio

    with gem.make_vec(["test:Count-v0"] * 2, async_mode=True) as envs:
        async def go():
            await envs.areset(seed=1)
            return await envs.astep(["\\boxed{1}", "\\boxed{2}"])

        assert len(asyncio.run(go())[0]) == 2


def test_process_backend_works_in_a_script_without_a_main_guard(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys, gem\n"
        "from gem.testing.envs import CountEnv\n"
        "gem.register('script:Count-v0', CountEnv)  # a class defined by the script's imports\n"
        "context = sys.argv[1] if len(sys.argv) > 1 else None\n"
        "envs = gem.make_vec(['script:Count-v0'] * 2, backend='process', backend_kwargs={'context': context})\n"
        "print(len(envs.reset()[0]))\n"
        "envs.close()\n"
    )
    ok = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and ok.stdout.strip() == "2", ok.stderr
    forkserver = subprocess.run([sys.executable, str(script), "forkserver"], capture_output=True, text=True,
                                timeout=60)
    assert forkserver.returncode != 0 and "if __name__ == '__main__':" in forkserver.stderr


# -- faults: nothing lost, nothing hangs ---------------------------------------------------

def _bounded(fn, seconds=60):
    """Run fn in a thread and fail (instead of hanging the suite) if it does not return."""
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"did not return within {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture
def fault_registry(count_registry):
    """count_registry, and an env without a state that a dead worker's restart cannot carry over."""
    count_registry.register("test:Stateless-v0-hard", "gem.testing.envs:StatelessFaultyEnv", high=100, max_turns=7)
    return count_registry


def test_a_dead_worker_never_makes_up_rewards_for_its_siblings(fault_registry):
    ids = ["test:Stateless-v0-hard", "test:Faulty-v0", "test:Stateless-v0-hard"]
    kwargs = {"seed": 5, "on_error": "reset"}
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}, **kwargs) as envs, \
            gem.make_vec(ids, backend="sync", **kwargs) as twin:
        envs.reset(), twin.reset()
        obs, rewards, terminated, truncated, infos = envs.step(["\\boxed{50}", "die", "\\boxed{50}"])
        expected = twin.step({0: "\\boxed{50}"})
        # env 0 stepped before its sibling killed the worker: its result is the real one
        assert (obs[0], rewards[0], infos[0]) == (expected[0][0], expected[1][0], expected[4][0])
        # env 1 killed it: a failure, reported as such
        assert truncated[1] and infos[1]["error_type"] == "WorkerDied"
        # env 2 never ran and has no state to run from in the fresh worker: its episode is reported lost
        assert np.isnan(rewards[2]) and truncated[2] and "episode_lost" in infos[2]
        assert "error" in infos[2] and obs[2].startswith("Guess")
        # env 0's episode died with the worker after its step: its next step says so
        obs, rewards, _, truncated, infos = envs.step(["\\boxed{25}"] * 3)
        assert np.isnan(rewards[0]) and truncated[0] and "episode_lost" in infos[0]
        assert not np.isnan(rewards[1:]).any() and "episode_lost" not in infos[1] and "episode_lost" not in infos[2]


#: one worker: a stateless env that answers before the killer, a stateful one before, one after
SIBLINGS = ["test:Stateless-v0-hard", "test:Count-v0-hard", "test:Faulty-v0", "test:Count-v0-hard"]
#: past max_turns (7): a truncation and an autoreset from each env's RNG too
GUESSES = [f"\\boxed{{{g}}}" for g in (50, 25, 75, 60, 55, 52, 51, 53, 40, 30)]


@pytest.mark.parametrize("fault, timeout", [("die", None), ("hang", 1.0)])
def test_the_siblings_of_a_dead_worker_go_on_from_their_state(fault_registry, fault, timeout):
    kwargs = {"seed": 7, "on_error": "reset", "wrappers": "concat_with_action,episode_tracking"}
    with gem.make_vec(SIBLINGS, backend="process", backend_kwargs={"num_workers": 1}, step_timeout=timeout,
                      **kwargs) as envs, gem.make_vec(SIBLINGS, backend="sync", **kwargs) as twin:
        assert envs.reset() == twin.reset()
        envs.step([GUESSES[0]] * 4), twin.step([GUESSES[0]] * 4)
        obs, rewards, _, truncated, infos = _bounded(lambda: envs.step([GUESSES[1]] * 2 + [fault, GUESSES[1]]))
        expected = twin.step({0: GUESSES[1], 1: GUESSES[1], 3: GUESSES[1]})
        # envs 0 and 1 answered before env 2 killed the worker; env 3 ran after it, in the fresh worker
        for k, i in enumerate((0, 1, 3)):
            assert (obs[i], rewards[i], infos[i]) == (expected[0][k], expected[1][k], expected[4][k])
        assert truncated[2] and infos[2]["error_type"] == ("WorkerDied" if fault == "die" else "StepTimeout")
        for step, guess in enumerate(GUESSES[2:]):
            obs, rewards, terminated, truncated, infos = envs.step([guess] * 4)
            expected = twin.step({1: guess, 3: guess})
            if step == 0:  # env 0 has no state: its episode died with the worker, and it says so
                assert np.isnan(rewards[0]) and truncated[0] and "episode_lost" in infos[0]
            assert [obs[1], obs[3]] == expected[0] and [infos[1], infos[3]] == expected[4]
            assert [rewards[1], rewards[3]] == expected[1].tolist()
            assert [terminated[1], terminated[3]] == expected[2].tolist()
            assert [truncated[1], truncated[3]] == expected[3].tolist()
        assert envs.call("get_state", indices=[1, 3]) == twin.call("get_state", indices=[1, 3])


def test_under_on_error_raise_the_siblings_of_a_dead_worker_keep_real_results(fault_registry):
    with gem.make_vec(SIBLINGS, backend="process", backend_kwargs={"num_workers": 1}, seed=7) as envs, \
            gem.make_vec(SIBLINGS, backend="sync", seed=7) as twin:
        envs.reset(), twin.reset()
        with pytest.raises(VectorEnvError, match=r"env 2 .*worker process died") as caught:
            envs.step([GUESSES[0]] * 2 + ["die", GUESSES[0]])
        expected = twin.step({0: GUESSES[0], 1: GUESSES[0], 3: GUESSES[0]})
        assert set(caught.value.failures) == {2} and set(caught.value.results) == {0, 1, 3}
        for k, i in enumerate((0, 1, 3)):
            assert caught.value.results[i] == tuple(part[k] for part in expected)
        with pytest.raises(VectorEnvError, match=r"env 0 .*EpisodeLost.*worker process died"):
            envs.step({0: GUESSES[1]})
        assert envs.step({1: GUESSES[1], 3: GUESSES[1]})[0] == twin.step({1: GUESSES[1], 3: GUESSES[1]})[0]


def test_a_sibling_whose_episode_ended_starts_the_next_one_after_a_worker_death(count_registry):
    kwargs = {"seed": 3, "autoreset_mode": "next_step", "on_error": "reset"}
    ids = ["test:Count-v0", "test:Faulty-v0"]
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}, **kwargs) as envs, \
            gem.make_vec(ids, backend="sync", **kwargs) as twin:
        envs.reset(), twin.reset()
        win = _solve(None, envs)[0]
        assert envs.step({0: win})[2][0] and twin.step({0: win})[2][0]
        envs.step({1: "die"})
        # env 0 ended its episode before the death: this step starts its next one, from its RNG
        got, want = envs.step({0: "ignored"}), twin.step({0: "ignored"})
        assert got[0] == want[0] and got[4] == want[4] and got[1].tolist() == want[1].tolist() == [0.0]
        assert got[0][0].startswith("Guess") and not (got[2][0] or got[3][0])
        assert envs.call("get_state", indices=[0]) == twin.call("get_state", indices=[0])


class NoStateEnv(CountEnv):
    def get_state(self):
        return None


class UnrestorableEnv(CountEnv):
    def set_state(self, state):
        raise RuntimeError("UnrestorableEnv cannot be restored")


def test_siblings_that_cannot_go_on_from_a_state_lose_their_episodes(count_registry):
    count_registry.register("test:NoState-v0", NoStateEnv)
    count_registry.register("test:Unrestorable-v0", UnrestorableEnv)
    ids = ["test:NoState-v0", "test:Unrestorable-v0", "test:Faulty-v0", "test:Count-v0"]
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}, on_error="reset") as envs:
        envs.reset()
        _, rewards, _, _, infos = envs.step(["\\boxed{0}"] * 2 + ["die", "\\boxed{0}"])
        assert not np.isnan(rewards).any() and "episode_lost" not in infos[3]
        _, rewards, _, _, infos = envs.step(["\\boxed{0}"] * 4)
        assert np.isnan(rewards[:2]).all() and "could not be restored" in infos[1]["episode_lost"]
        assert "could not be restored" not in infos[0]["episode_lost"] and not np.isnan(rewards[2:]).any()
    # a vector env told not to keep states: every sibling's episode is lost, as without one
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1, "restore_siblings": False},
                      on_error="reset") as envs:
        envs.reset()
        _, rewards, _, _, infos = envs.step(["\\boxed{0}"] * 2 + ["die", "\\boxed{0}"])
        assert np.isnan(rewards[3]) and "episode_lost" in infos[3]


def _lists(result):
    """A step's 5-tuple with its arrays as lists, to compare with ``==``."""
    return tuple(part.tolist() if isinstance(part, np.ndarray) else part for part in result)


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_the_siblings_of_a_worker_that_dies_long_after_their_snapshots_replay_their_calls(count_registry, mode):
    ids = ["test:Count-v0-hard", "test:Faulty-v0", "test:Count-v0-hard"]
    kwargs = {"seed": 7, "autoreset_mode": mode, "on_error": "reset", "wrappers": "concat_with_action"}
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}, **kwargs) as envs, \
            gem.make_vec(ids, backend="sync", **kwargs) as twin:
        assert envs.reset() == twin.reset()
        ended = []
        for guess in GUESSES:  # past max_turns (7): an episode ends and the next one starts
            got = envs.step({0: guess, 2: guess})
            assert _lists(got) == _lists(twin.step({0: guess, 2: guess}))
            ended.append(got[3][0] or got[2][0])
        assert any(ended[:-1])
        # nothing snapshotted since each env's reset: the fresh worker replays all these steps
        assert [len(envs.recovery.replays[i]) for i in (0, 2)] == [len(GUESSES)] * 2
        assert envs.step({1: "die"})[4][0]["error_type"] == "WorkerDied"
        for guess in GUESSES[:3]:
            assert _lists(envs.step({0: guess, 2: guess})) == _lists(twin.step({0: guess, 2: guess}))
        assert envs.call("get_state", indices=[0, 2]) == twin.call("get_state", indices=[0, 2])


def test_a_sibling_whose_replay_answers_otherwise_is_reported_lost(count_registry):
    count_registry.register("test:Drifting-v0", DriftingEnv)
    ids = ["test:Drifting-v0", "test:Faulty-v0", "test:Count-v0"]
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}, on_error="reset") as envs:
        envs.reset()
        envs.step({0: "\\boxed{0}", 2: "\\boxed{0}"})
        envs.step({1: "die"})
        _, rewards, _, truncated, infos = envs.step(["\\boxed{0}"] * 3)
        # env 0's restored state answered its replayed step otherwise than before: lost, and why
        assert np.isnan(rewards[0]) and truncated[0]
        assert "could not be restored" in infos[0]["episode_lost"]
        assert "not deterministic given its get_state() and the action" in infos[0]["episode_lost"]
        assert not np.isnan(rewards[1:]).any() and "episode_lost" not in infos[2]
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}) as envs:
        envs.reset()
        envs.step({0: "\\boxed{0}"})
        with pytest.raises(VectorEnvError, match="worker process died"):
            envs.step({1: "die"})
        with pytest.raises(VectorEnvError, match=r"env 0 .*EpisodeLost.*replaying its step 1 of 1 .*Wrong"):
            envs.step({0: "\\boxed{0}"})


class DiesOnRestoreEnv(CountEnv):
    def set_state(self, state):
        os.kill(os.getpid(), signal.SIGKILL)


def test_a_sibling_whose_restore_kills_the_fresh_worker_costs_only_its_own_episode(count_registry):
    count_registry.register("test:DiesOnRestore-v0", DiesOnRestoreEnv)
    ids = ["test:Count-v0-hard", "test:DiesOnRestore-v0", "test:Faulty-v0", "test:Count-v0-hard"]
    kwargs = {"seed": 7, "on_error": "reset"}
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}, **kwargs) as envs, \
            gem.make_vec(ids, backend="sync", **kwargs) as twin:
        envs.reset(), twin.reset()
        envs.step([GUESSES[0]] * 4), twin.step([GUESSES[0]] * 4)
        envs.step({2: "die"})  # env 1's restore kills the fresh worker too; a third one takes over
        got, want = envs.step([GUESSES[1]] * 4), twin.step({0: GUESSES[1], 3: GUESSES[1]})
        assert [got[0][0], got[0][3]] == want[0] and [got[1][0], got[1][3]] == want[1].tolist()
        assert np.isnan(got[1][1]) and "could not be restored" in got[4][1]["episode_lost"]
        assert envs.call("get_state", indices=[0, 3]) == twin.call("get_state", indices=[0, 3])


class StateCountingEnv(CountEnv):
    """Counts the calls of its get_state."""

    reads = 0

    def get_state(self):
        self.reads += 1
        return super().get_state()


def test_a_worker_snapshots_an_env_only_now_and_then(monkeypatch):
    monkeypatch.setattr(slot_module, "SNAPSHOT_SECONDS", float("inf"))  # counting calls, not their time
    slot = Slot(0, StateCountingEnv, None, AutoresetMode.SAME_STEP, "raise")
    answers = [run_remote(slot, (0, "reset", (3, {}), {}), True)]
    answers += [run_remote(slot, (0, "step", ("\\boxed{0}",), {}), True) for _ in range(2 * SNAPSHOT_CALLS)]
    # the first call, then every SNAPSHOT_CALLS calls
    assert [n for n, (_, snapshot) in enumerate(answers) if snapshot] == [0, SNAPSHOT_CALLS, 2 * SNAPSHOT_CALLS]
    assert slot.env.reads == 3
    # a call that failed, or a big one, snapshots at once
    assert isinstance(run_remote(slot, (0, "call", ("no_such_method",), {}), True)[1], bytes)
    assert run_remote(slot, (0, "step", ("\\boxed{0}",), {}), True)[1] is None
    assert isinstance(run_remote(slot, (0, "step", ("x" * SNAPSHOT_BYTES,), {}), True)[1], bytes)
    # so do calls that took SNAPSHOT_SECONDS since the last snapshot (here: each step) ...
    monkeypatch.setattr(slot_module, "SNAPSHOT_SECONDS", 0.02)
    monkeypatch.setattr(slot_module, "SNAPSHOT_COST_RATIO", 0)
    slow = Slot(1, lambda: SlowEnv(delay=0.02), None, AutoresetMode.SAME_STEP, "raise")
    assert all(run_remote(slow, (1, "step", ("\\boxed{0}",), {}), True)[1] for _ in range(3))
    # ... or SNAPSHOT_COST_RATIO times what the last snapshot took, if longer (here: 1 s)
    monkeypatch.setattr(slot_module, "SNAPSHOT_COST_RATIO", 20)
    slow.env.get_state = lambda: time.sleep(0.05) or {"target": 1, "turn": 0, "rng": slow.env.rng_state()}
    run_remote(slow, (1, "call", ("no_such_method",), {}), True)
    assert run_remote(slow, (1, "step", ("\\boxed{0}",), {}), True)[1] is None
    # a worker holding one env sends none
    assert run_remote(slot, (0, "step", ("\\boxed{0}",), {}), False)[1] is None and slot.env.reads == 5


class UnpicklableStateEnv(CountEnv):
    def get_state(self):
        return {**super().get_state(), "callback": lambda: None}


def test_a_state_that_cannot_leave_the_worker_counts_as_none():
    slot = Slot(0, UnpicklableStateEnv, None, AutoresetMode.SAME_STEP, "raise")
    assert run_remote(slot, (0, "reset", (3, {}), {}), True)[1] == NO_STATE and slot.stateless
    assert run_remote(slot, (0, "step", ("\\boxed{0}",), {}), True)[1] is None  # and is not tried again


def test_a_process_worker_does_not_snapshot_a_trivial_env_on_every_call(count_registry):
    count_registry.register("test:StateCounting-v0", StateCountingEnv)
    with gem.make_vec(["test:StateCounting-v0"] * 2, backend="process", backend_kwargs={"num_workers": 1}) as envs:
        envs.reset()
        for _ in range(50):
            envs.step(["\\boxed{0}"] * 2)
        # one at the reset; at most one more, should the loaded machine make 50 steps last SNAPSHOT_SECONDS
        assert all(1 <= reads <= 2 for reads in envs.call("reads"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reset_that_raises_during_autoreset_is_reported_not_raised(count_registry, backend):
    count_registry.register("test:BadReset-v0", "gem.testing.envs:FaultyEnv", max_turns=1, fail_unseeded_resets=True)
    with gem.make_vec(["test:BadReset-v0", "test:Count-v0"], backend=backend, on_error="reset") as envs:
        envs.reset()
        obs, rewards, terminated, truncated, infos = envs.step(["\\boxed{0}", "\\boxed{0}"])
        assert truncated[0] and rewards[0] == 0.0  # the episode's own last step, as it happened
        assert "reset_error" in infos[0] and "could not build" in infos[0]["reset_error"]
        assert infos[0]["final_obs"].startswith("Wrong")
        obs, rewards, terminated, truncated, infos = envs.step(["\\boxed{0}", "\\boxed{0}"])  # keeps trying
        assert "reset_error" in infos[0] and not (terminated[0] or truncated[0])


