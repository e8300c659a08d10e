import threading

import numpy as np
import pytest

import gem
from gem.errors import VectorEnvError

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


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_sub_env_names_its_index_and_id(count_registry, backend):
    with gem.make_vec(["test:Count-v0", "test:Faulty-v0"], backend=backend) as envs:
        envs.reset()
        with pytest.raises(VectorEnvError, match=r"env 1 \(test:Faulty-v0\) raised RuntimeError") as info:
            envs.step(["\\boxed{1}", "raise"])
        assert info.value.index == 1 and info.value.env_id == "test:Faulty-v0"


@pytest.mark.parametrize("backend", BACKENDS)
def test_on_error_reset_reports_in_info(count_registry, backend):
    with gem.make_vec(["test:Count-v0", "test:Faulty-v0"], backend=backend, on_error="reset") as envs:
        envs.reset()
        obs, rewards, terminated, truncated, infos = envs.step(["\\boxed{0}", "raise"])
        assert truncated[1] and not terminated[1] and rewards[1] == 0
        assert "FaultyEnv was asked to raise" in infos[1]["error"]
        assert obs[1].startswith("Guess")
        envs.step(["\\boxed{0}", "\\boxed{0}"])  # the env keeps working


def test_a_dead_process_worker_is_restarted(count_registry):
    ids = ["test:Faulty-v0", "test:Count-v0"]
    with gem.make_vec(ids, backend="process", on_error="reset") as envs:
        envs.reset()
        obs, _, _, truncated, infos = envs.step(["die", "\\boxed{0}"])
        assert truncated[0] and "worker process died" in infos[0]["error"]
        assert obs[0].startswith("Guess")
        envs.step(["\\boxed{0}", "\\boxed{0}"])
    with gem.make_vec(ids, backend="process", backend_kwargs={"num_workers": 1}) as envs:
        envs.reset()
        with pytest.raises(VectorEnvError, match="worker process died"):
            envs.step({0: "die"})
        # env 1 shared the worker but was not stepped: its loss is reported on its next step
        with pytest.raises(VectorEnvError, match=r"env 1 .*worker process died"):
            envs.step({1: "\\boxed{0}"})
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_on_error_raise_keeps_the_healthy_envs_results(count_registry, backend):
    ids = ["test:Count-v0-hard", "test:Faulty-v0", "test:Count-v0-hard"]
    with gem.make_vec(ids, backend=backend, seed=3) as envs, gem.make_vec(ids, backend="sync", seed=3) as twin:
        envs.reset(), twin.reset()
        with pytest.raises(VectorEnvError) as caught:
            envs.step(["\\boxed{50}", "raise", "\\boxed{50}"])
        expected = twin.step({0: "\\boxed{50}", 2: "\\boxed{50}"})
        err = caught.value
        assert set(err.results) == {0, 2} and set(err.failures) == {1}
        assert err.failures[1].type == "RuntimeError"
        for k, i in enumerate((0, 2)):  # a dict step answers in the dict's order
            obs, reward, terminated, truncated, info = err.results[i]
            assert (obs, reward, terminated, truncated, info) == tuple(part[k] for part in expected)
        # the healthy envs went on from that step: their next step matches the twin's
        assert envs.step({0: "\\boxed{25}"})[0] == twin.step({0: "\\boxed{25}"})[0]


def test_a_dead_worker_never_makes_up_rewards_for_its_siblings(count_registry):
    ids = ["test:Count-v0-hard", "test:Faulty-v0", "test:Count-v0-hard"]
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
        # env 2 never ran: its episode is reported lost, with no reward
        assert np.isnan(rewards[2]) and truncated[2] and "episode_lost" in infos[2]
        assert "error" in infos[2] and obs[2].startswith("Guess")
        # env 0's episode died with the worker after its step: its next step says so
        obs, rewards, _, truncated, infos = envs.step(["\\boxed{25}"] * 3)
        assert np.isnan(rewards[0]) and truncated[0] and "episode_lost" in infos[0]
        assert not np.isnan(rewards[1:]).any() and "episode_lost" not in infos[1] and "episode_lost" not in infos[2]


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


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_step_that_never_returns_times_out_and_the_env_is_replaced(count_registry, backend):
    ids = ["test:Count-v0-hard", "test:Faulty-v0", "test:Count-v0-hard"]
    with gem.make_vec(ids, backend=backend, on_error="reset", step_timeout=1.0, seed=1) as envs:
        envs.reset()
        obs, rewards, terminated, truncated, infos = _bounded(lambda: envs.step(["\\boxed{50}", "hang", "\\boxed{50}"]))
        assert truncated[1] and infos[1]["error_type"] == "StepTimeout" and obs[1].startswith("Guess")
        assert "error" not in infos[0] and "error" not in infos[2]
        _bounded(lambda: envs.step(["\\boxed{50}"] * 3))  # the replacement env works
    with gem.make_vec(ids, backend=backend, step_timeout=1.0) as envs:
        envs.reset()
        with pytest.raises(VectorEnvError, match="did not return within") as caught:
            _bounded(lambda: envs.step(["\\boxed{50}", "hang", "\\boxed{50}"]))
        assert caught.value.failures[1].type == "StepTimeout" and set(caught.value.results) == {0, 2}
