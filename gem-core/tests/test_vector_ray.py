"""The ``ray`` vector backend, against a Ray cluster that this module starts and stops.

The cluster is started the way a user starts one (``ray start --head`` in another
process) and the backend connects to it by address, so every test here also exercises
the "existing cluster" path. Needs ``pip install 'gem-core[ray]'``.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import ray

import gem
from gem.errors import VectorEnvError

# Environment of the test cluster's processes. Ray turns 127.0.0.1 into the machine's
# network address unless it runs as a one-machine cluster; the first flag (named for
# Windows and macOS, where that is the default) keeps every port it opens on the loopback
# interface. Ray reads it when imported, so this process, which imported Ray already, gets
# it through ray_constants (see ray_address). A head node turns token authentication on
# when ~/.ray/auth_token exists, a driver does not: the test cluster runs without it.
CLUSTER_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def ray_address():
    """The address of a two-CPU Ray head node running in another process."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray._private.ray_constants, "ENABLE_RAY_CLUSTER", False)
        yield from _start_head()


def _start_head():
    with socket.socket() as s:  # a free port outside Ray's worker port range (10002-19999)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp_dir = tempfile.mkdtemp(prefix="gem-ray-")  # short: Ray's socket paths must fit in 107 bytes
    log_path = Path(temp_dir) / "head.log"
    command = [
        str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
        f"--port={port}", "--num-cpus=2", f"--object-store-memory={100 * 1024**2}", "--include-dashboard=false",
        "--disable-usage-stats", f"--temp-dir={temp_dir}",
    ]
    with open(log_path, "w") as log:
        head = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **CLUSTER_ENV})
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log_path.read_text():
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"`ray start --head` did not come up:\n{log_path.read_text()}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        ray.shutdown()
        head.terminate()  # with --block, SIGTERM stops every process of the head node
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture
def make_ray_vec(ray_address, count_registry):
    """``gem.make_vec(..., backend="ray")`` connected to the module's cluster by address."""

    def make(ids, backend_kwargs=None, **kwargs):
        return gem.make_vec(ids, backend="ray", backend_kwargs={"address": ray_address, **(backend_kwargs or {})},
                            **kwargs)

    return make


def _solve(envs):
    """The winning action for each env, read from its state (tests only)."""
    return [f"\\boxed{{{s['target']}}}" for s in envs.get_state()]


def test_ray_agrees_with_sync_on_a_seeded_run(make_ray_vec):
    ids = ["test:Count-v0-hard"] * 3
    with gem.make_vec(ids, seed=11, backend="sync") as reference, make_ray_vec(ids, seed=11) as envs:
        assert envs.backend == "ray" and len(envs._actors) == 2  # the cluster's two CPUs
        assert envs.reset() == reference.reset()
        for guess in (50, 25, 75, 60, 55, 52, 51, 53):  # past max_turns: truncation and autoreset too
            a, b = envs.step([f"\\boxed{{{guess}}}"] * 3), reference.step([f"\\boxed{{{guess}}}"] * 3)
            assert a[0] == b[0] and a[4] == b[4]
            for x, y in zip(a[1:4], b[1:4]):
                np.testing.assert_array_equal(x, y)
        assert envs.get_state() == reference.get_state()


def test_same_step_autoreset_keeps_the_final_observation(make_ray_vec):
    with make_ray_vec(["test:Count-v0"] * 2, seed=3) as envs:
        envs.reset()
        obs, rewards, terminated, _, infos = envs.step(_solve(envs))
        assert rewards.tolist() == [1.0, 1.0] and terminated.all()
        assert all(i["final_obs"] == "Correct!" and i["final_info"]["correct"] for i in infos)
        assert all(o.startswith("Guess a number") for o in obs)


def test_next_step_and_disabled_autoreset(make_ray_vec):
    with make_ray_vec(["test:Count-v0"], autoreset_mode="next_step") as envs:
        envs.reset()
        obs, _, terminated, _, _ = envs.step(_solve(envs))
        assert obs == ["Correct!"] and terminated[0]
        obs, rewards, terminated, truncated, _ = envs.step(["ignored"])
        assert obs[0].startswith("Guess") and rewards[0] == 0 and not terminated[0] and not truncated[0]
    with make_ray_vec(["test:Count-v0"] * 2, autoreset_mode="disabled") as envs:
        envs.reset()
        obs, _, _, _, infos = envs.step(_solve(envs))
        assert obs == ["Correct!"] * 2 and "final_obs" not in infos[0]
        obs, _ = envs.reset(indices=[1], seed=[4])
        assert len(obs) == 1 and obs[0].startswith("Guess")


def test_dict_actions_step_only_those_envs(make_ray_vec):
    with make_ray_vec(["test:Count-v0"] * 3) as envs:
        envs.reset()
        before = envs.call("turn")
        obs, rewards, terminated, truncated, infos = envs.step({2: "\\boxed{0}", 0: "\\boxed{0}"})
        # results in the dict's order, as in the reference package
        assert len(obs) == len(infos) == 2 and rewards.shape == terminated.shape == (2,)
        assert all(isinstance(o, str) for o in obs)
        assert envs.call("turn") == [before[0] + 1, before[1], before[2] + 1]
        with pytest.raises(IndexError):
            envs.step({7: "x"})


def test_call_and_state_round_trip(make_ray_vec):
    with make_ray_vec(["test:Count-v0"] * 2, vec_kwargs=[{"high": 5}, {"high": 6}], seed=2) as envs:
        assert envs.call("high") == [5, 6]
        envs.reset()
        actions = envs.sample_random_action()
        saved = envs.get_state()
        first = envs.step(actions)
        after = envs.get_state()
        envs.set_state(saved)
        again = envs.step(actions)
        assert again[0] == first[0] and again[1].tolist() == first[1].tolist() and envs.get_state() == after


def test_an_env_that_cannot_be_built_is_named(make_ray_vec, count_registry):
    count_registry.register("test:Broken-v0", "gem.testing.envs:CountEnv", no_such_argument=1)
    broken = r"env 1 \(test:Broken-v0\) raised (TypeError|EnvArgumentError).*Ray actor"
    with pytest.raises(VectorEnvError, match=broken):
        make_ray_vec(["test:Count-v0", "test:Broken-v0"])


def test_an_env_not_stepped_when_its_actor_died_goes_on_from_its_state(make_ray_vec):
    ids = ["test:Faulty-v0", "test:Count-v0"]
    with make_ray_vec(ids, backend_kwargs={"num_actors": 1}) as envs:
        envs.reset()
        envs.step({1: "\\boxed{0}"})
        with pytest.raises(VectorEnvError, match=r"env 0 .*Ray actor died"):
            envs.step({0: "die"})
        # env 1 shared the actor but was not stepped: it goes on from its state in the new actor
        assert envs.call("turn", indices=[1]) == [1]
        envs.reset()
        envs.step(["\\boxed{0}", "\\boxed{0}"])


#: one actor: a stateless env that answers before the killer, a stateful one before, one after
SIBLINGS = ["test:Stateless-v0-hard", "test:Count-v0-hard", "test:Faulty-v0", "test:Count-v0-hard"]
GUESSES = [f"\\boxed{{{g}}}" for g in (50, 25, 75, 60, 55, 52, 51, 53, 40, 30)]  # a truncation and autoreset too


@pytest.mark.parametrize("fault, timeout", [("die", None), ("hang", 2.0)])
def test_the_siblings_of_a_dead_actor_go_on_from_their_state(make_ray_vec, count_registry, fault, timeout):
    count_registry.register("test:Stateless-v0-hard", "gem.testing.envs:StatelessFaultyEnv", high=100, max_turns=7)
    kwargs = {"seed": 7, "on_error": "reset", "wrappers": "concat_with_action,episode_tracking"}
    with make_ray_vec(SIBLINGS, backend_kwargs={"num_actors": 1}, step_timeout=timeout, **kwargs) as envs, \
            gem.make_vec(SIBLINGS, backend="sync", **kwargs) as twin:
        assert envs.reset() == twin.reset()
        obs, rewards, _, truncated, infos = envs.step([GUESSES[0]] * 2 + [fault, GUESSES[0]])
        expected = twin.step({0: GUESSES[0], 1: GUESSES[0], 3: GUESSES[0]})
        # envs 0 and 1 ran before env 2 killed the actor; env 3 ran after it, in the new actor. A
        # SIGKILL can beat the reply of a call the actor had finished out of it: the call then runs
        # again in the new actor, which env 1 (restored from its snapshot) answers as before, while
        # env 0, which has no state, reports its episode lost at once, as well as on its next call
        lost_at_once = "episode_lost" in infos[0]
        assert not lost_at_once or fault == "die"
        for k, i in enumerate((0, 1, 3)):
            if i == 0 and lost_at_once:
                assert np.isnan(rewards[0]) and truncated[0]
                continue
            assert (obs[i], rewards[i], infos[i]) == (expected[0][k], expected[1][k], expected[4][k])
        assert truncated[2] and infos[2]["error_type"] == ("WorkerDied" if fault == "die" else "StepTimeout")
        for step, guess in enumerate(GUESSES[1:]):
            obs, rewards, terminated, truncated, infos = envs.step([guess] * 4)
            expected = twin.step({1: guess, 3: guess})
            if step == 0:  # env 0 has no state: its episode died with the actor (the first actor,
                # or, if lost at once, the fresh one its lost call ran again in), and it says so
                assert np.isnan(rewards[0]) and truncated[0] and "episode_lost" in infos[0]
            assert [obs[1], obs[3]] == expected[0] and [infos[1], infos[3]] == expected[4]
            assert [rewards[1], rewards[3], terminated[1], terminated[3], truncated[1], truncated[3]] == \
                expected[1].tolist() + expected[2].tolist() + expected[3].tolist()
        assert envs.call("get_state", indices=[1, 3]) == twin.call("get_state", indices=[1, 3])


def test_a_death_whose_replies_were_lost_reruns_the_unanswered_calls_to_find_the_killer(make_ray_vec):
    """An actor that dies can take with it the replies to calls it had finished, so the first
    unanswered call is not known to be the killer. Here the reply to env 1's step is lost as if
    the actor died right after running it: env 1 goes back to its snapshot in the fresh actor and
    its step runs again (its answer is the twin's), and the second death names env 0's call."""
    ids = ["test:Faulty-v0", "test:Count-v0"]
    with make_ray_vec(ids, backend_kwargs={"num_actors": 1}, on_error="reset", seed=3) as envs, \
            gem.make_vec(ids, backend="sync", seed=3) as twin:
        assert envs.reset() == twin.reset()
        step = (1, "step", ("\\boxed{3}",), {})
        expected = twin.step({1: "\\boxed{3}"})
        ray.get(envs._actors[0].handle.execute.remote([step]))  # env 1 ran it; its reply is dropped
        ray.kill(envs._actors[0].handle, no_restart=True)
        results: dict = {}
        envs._lose_actor(0, [(step, None), ((0, "step", ("die",), {}), None)], results,
                         "its Ray actor died (test)")
        obs, reward, terminated, truncated, info = results[1]
        assert (obs, reward, info) == (expected[0][0], expected[1][0], expected[4][0])
        assert results[0][3] and results[0][4]["error_type"] == "WorkerDied"
        assert envs.call("get_state", indices=[1]) == twin.call("get_state", indices=[1])


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
def test_the_siblings_of_an_actor_that_dies_long_after_their_snapshots_replay_their_calls(
        make_ray_vec, count_registry, mode):
    count_registry.register("test:Drifting-v0", "gem.testing.envs:DriftingEnv")
    ids = ["test:Count-v0-hard", "test:Faulty-v0", "test:Drifting-v0"]
    kwargs = {"seed": 7, "autoreset_mode": mode, "on_error": "reset"}
    with make_ray_vec(ids, backend_kwargs={"num_actors": 1}, **kwargs) as envs, \
            gem.make_vec(ids, backend="sync", **kwargs) as twin:
        assert envs.reset() == twin.reset()
        for guess in GUESSES:  # past max_turns (7): an episode ends and the next one starts, unsnapshotted
            got, want = envs.step({0: guess, 2: guess}), twin.step({0: guess, 2: guess})
            assert got[0] == want[0] and got[1].tolist() == want[1].tolist() and got[4] == want[4]
        assert envs.step({1: "die"})[4][0]["error_type"] == "WorkerDied"
        got, want = envs.step({0: GUESSES[0], 2: GUESSES[0]}), twin.step({0: GUESSES[0], 2: GUESSES[0]})
        # env 0's replay answered as before: it goes on; env 2's did not (its observations count its
        # moves, which its state leaves out): lost, and why
        assert got[0][0] == want[0][0] and got[1][0] == want[1][0] and got[4][0] == want[4][0]
        assert np.isnan(got[1][1]) and "not deterministic" in got[4][1]["episode_lost"]
        assert envs.call("get_state", indices=[0]) == twin.call("get_state", indices=[0])


def test_ray_address_selects_the_cluster_and_import_gem_stays_light(ray_address):
    script = (
        "import sys, gem, gem.vector\n"
        "assert 'ray' not in sys.modules, 'import gem imported ray'\n"
        "from gem.testing.envs import CountEnv\n"
        "gem.register('script:Count-v0', CountEnv)\n"
        "with gem.make_vec(['script:Count-v0'] * 2, backend='ray', seed=5) as envs:\n"
        "    print(len(envs.reset()[0]))\n"
        "import ray\n"
        "print(ray.get_runtime_context().gcs_address)\n"
    )
    env = {**os.environ, **CLUSTER_ENV, "RAY_ADDRESS": ray_address}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", ray_address]  # the existing cluster, not a new local one


def test_without_an_address_a_local_instance_is_started(ray_address):
    script = (
        "import gem, ray\n"
        "from gem.testing.envs import CountEnv\n"
        "gem.register('script:Count-v0', CountEnv)\n"
        "init = {'num_cpus': 1, 'include_dashboard': False, 'object_store_memory': 100 * 1024**2}\n"
        "with gem.make_vec(['script:Count-v0'] * 2, backend='ray', backend_kwargs={'init_kwargs': init}) as envs:\n"
        "    print(len(envs.reset()[0]), len(envs._actors))\n"
        "print(ray.get_runtime_context().gcs_address)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | CLUSTER_ENV
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    envs, actors, address = done.stdout.split()
    assert (envs, actors) == ("2", "1") and address != ray_address  # its own one-CPU instance


def test_without_ray_the_error_says_what_to_install(count_registry, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # what an interpreter without Ray sees
    monkeypatch.delitem(sys.modules, "gem.vector.ray", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'gem-core\[ray\]'"):
        gem.make_vec(["test:Count-v0"], backend="ray")
