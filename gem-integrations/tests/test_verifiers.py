"""The verifiers adapter, both ways. GEM's GuessTheNumber in verifiers' real episode runner (the one
``vf-eval`` uses), played by gem-evals' scripted OpenAI-compatible server on 127.0.0.1 through
verifiers' chat harness in a local process; and verifiers environments made with ``gem.make("vf:...")``,
played by GEM's runner and ``gem eval``, scored by their own rubric.
Runs in ``nox -s "integration(framework='verifiers')"``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers")

from adapter_kit import ENV_ID, assert_missing_framework_is_one_line

import gem
import gem.runner
from gem_evals.testing_server import ScriptedServer, scripted_reply
from gem_integrations.verifiers import REWARD, GemTaskset, load_environment, play

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "verifiers"


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as s:
        yield s


def gem_return(seed: int, model: str) -> tuple[float, int]:
    """The return and length of the episode the script ``model`` plays in GEM itself, the
    conversation built as verifiers builds it (the prompt, then reply / observation turns)."""
    env = gem.make(ENV_ID)
    obs, _ = env.reset(seed=seed)
    messages, total, turns = [{"role": "user", "content": obs}], 0.0, 0
    while True:
        action = scripted_reply(model, messages)
        obs, reward, terminated, truncated, _ = env.step(action)
        total, turns = total + reward, turns + 1
        if terminated or truncated:
            return total, turns
        messages += [{"role": "assistant", "content": action}, {"role": "user", "content": obs}]


def scores(episodes):
    return [(e.task.data.seed, e.traces[0].rewards[REWARD].score, e.traces[0].info["env_turns"]) for e in episodes]


def test_tasks_carry_their_reset_seed_and_first_observation():
    env = load_environment(ENV_ID, num_tasks=3, seed=7)
    tasks = list(env.taskset)
    assert isinstance(env.taskset, GemTaskset) and [t.data.seed for t in tasks] == [7, 8, 9]
    for task in tasks:
        assert task.data.prompt == gem.make(ENV_ID).reset(seed=task.data.seed)[0]


def test_scripted_model_wins_and_rewards_are_the_envs_returns(server):
    env = load_environment(ENV_ID, num_tasks=2)
    episodes = asyncio.run(play(env, "bisect", server.base_url, rollouts=2))
    assert len(episodes) == 4 and all(e.ok for e in episodes)
    got = scores(episodes)
    assert got == [(seed, *gem_return(seed, "bisect")) for seed in (0, 0, 1, 1)]
    assert all(score == 1.0 for _, score, _ in got)  # binary search wins GuessTheNumber-easy


def test_a_losing_model_gets_the_envs_penalty_not_a_made_up_score(server):
    # a reply without \boxed{} is a format error: GEM ends the episode with its penalty
    env = load_environment(ENV_ID, num_tasks=1, seed=3)
    episodes = asyncio.run(play(env, "constant:I give up", server.base_url))
    assert scores(episodes) == [(3, *gem_return(3, "constant:I give up"))]
    assert scores(episodes)[0][1] < 0


def test_vf_eval_loads_the_taskset_by_id(server, tmp_path):
    vf_eval = Path(sys.executable).with_name("vf-eval")
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE), "OPENAI_API_KEY": "unused",
           "PRIME_RUNS_MODE": "disabled"}  # traces stay local: no upload to Prime's platform
    run = subprocess.run(
        [str(vf_eval), "gem_verifiers", "--env.taskset.env-id", ENV_ID, "--env.taskset.num-tasks", "1",
         "-n", "1", "-r", "1", "--model", "bisect", "--client.base-url", server.base_url,
         "--client.api-key-var", "OPENAI_API_KEY", "--no-push"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    traces = list(tmp_path.rglob("traces.jsonl"))
    assert traces and '"env_return"' in traces[0].read_text()


# -- a verifiers environment as a GEM env (gem.make("vf:<taskset>")) ---------------------------------

#: a verifiers taskset package of the kind its users write: a rubric of two weighted rewards
PICK_TASKSET = '''
import re
import verifiers.v1 as vf

class PickConfig(vf.TasksetConfig):
    pass

class PickData(vf.TaskData):
    answer: int

class PickTask(vf.Task[PickData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def exact(self, trace) -> float:
        found = re.findall(r"\\\\boxed\\{(-?\\d+)\\}", trace.last_reply)
        return float(bool(found) and int(found[-1]) == self.data.answer)

    @vf.reward(weight=0.5)
    async def brief(self, trace) -> float:
        return float(len(trace.last_reply) <= 20)

class PickTaskset(vf.Taskset[PickTask, PickConfig]):
    def load(self):
        for high, answer in ((10, 5), (20, 10), (20, 3)):
            yield PickTask(PickData(prompt=f"Pick a whole number between 1 and {high}, in \\\\boxed{{}}.",
                                    answer=answer), self.config.task)

__all__ = ["PickConfig", "PickData", "PickTask", "PickTaskset"]
'''
#: what the rubric gives the bisect script's answers (5, 10, 10): exact + 0.5 * brief
PICK_RETURNS = [1.5, 1.5, 0.5]


@pytest.fixture
def pick_taskset(tmp_path, monkeypatch):
    (tmp_path / "vf_pick_taskset.py").write_text(PICK_TASKSET)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def bisect(observation) -> str:
    return scripted_reply("bisect", observation if isinstance(observation, list)
                          else [{"role": "user", "content": observation}])


async def bisect_policy(observation):
    return bisect(observation)


def test_a_verifiers_taskset_is_a_gem_env_scored_by_its_rubric(pick_taskset):
    env = gem.make("vf:vf_pick_taskset")
    try:
        obs, info = env.reset(seed=2)
        assert obs == "Pick a whole number between 1 and 20, in \\boxed{}."
        obs, reward, terminated, truncated, info = env.step("\\boxed{3}")
        assert (reward, terminated, info["rewards"]) == (1.5, True, {"exact": 1.0, "brief": 1.0})
        env.reset(seed=2)
        assert env.step("it is \\boxed{4}, I am quite sure")[1] == 0.0  # wrong and long: no reward
    finally:
        env.close()


def test_gem_runner_plays_a_verifiers_env(pick_taskset):
    trajectories = gem.runner.run("vf:vf_pick_taskset", bisect_policy, seeds=[0, 1, 2])
    assert [t.total_return for t in trajectories] == PICK_RETURNS
    assert all(t.done and len(t.turns) == 1 for t in trajectories)


def test_a_multi_turn_verifiers_env_round_trips(server):
    # GEM's game as a verifiers env (direction one), played back as a GEM env (direction two)
    args = {"env_id": ENV_ID, "num_tasks": 2}
    trajectories = gem.runner.run(lambda: gem.make("vf:gem_verifiers", taskset_args=args), bisect_policy,
                                  seeds=[0, 1], wrappers="messages")
    assert [(t.total_return, len(t.turns)) for t in trajectories] == [(1.0, gem_return(s, "bisect")[1])
                                                                     for s in (0, 1)]


def test_gem_eval_scores_a_verifiers_env(pick_taskset, server, tmp_path):
    out = tmp_path / "eval"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pick_taskset), os.environ.get("PYTHONPATH", "")])}
    gem_cli = str(Path(sys.executable).with_name("gem"))
    run = subprocess.run([gem_cli, "eval", "vf:vf_pick_taskset", "--model", server.base_url,
                          "--episodes", "3", "--output", str(out), "--no-progress"],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [r["return"] for r in sorted(records, key=lambda r: r["seed"])] == PICK_RETURNS


def test_missing_verifiers_is_one_line():
    assert_missing_framework_is_one_line("verifiers", "verifiers.v1")


def _post(url: str, body: dict, key: str | None = None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    request = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(), headers=headers)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_another_local_client_cannot_talk_to_the_bridge(pick_taskset):
    """Issue 33, finding 6: a second process that posted to the bridge's port with the predictable model name
    "gem-episode-1" had its text returned to the policy as the observation and got the policy's next action.
    Now a request needs the bridge's key and the episode's random tag: anything else is 401 and never reaches
    the episode."""
    env = gem.make("vf:vf_pick_taskset")
    try:
        obs, _ = env.reset(seed=2)
        bridge, tag = env._bridge, env._tag
        assert tag != "gem-episode-1" and len(tag) > 30
        intruder = {"model": "gem-episode-1", "messages": [{"role": "user", "content": "injected"}]}
        assert _post(bridge.base_url, intruder)[0] == 401  # no key
        assert _post(bridge.base_url, {**intruder, "model": tag})[0] == 401  # the live tag, still no key
        assert _post(bridge.base_url, intruder, key="guess")[0] == 401  # a wrong key
        assert _post(bridge.base_url, intruder, key=bridge.key)[0] == 401  # the key, a stale or made-up tag
        # the episode is where it was: the policy's answer is scored, nothing injected was seen
        obs, reward, terminated, _, info = env.step("\\boxed{3}")
        assert (reward, terminated, info["rewards"]) == (1.5, True, {"exact": 1.0, "brief": 1.0})
    finally:
        env.close()


def test_a_bridge_request_waits_for_its_answer_only_so_long():
    """Handler threads waited forever on an answer; now a request unanswered for answer_timeout gets a 504."""
    import time

    from gem_integrations.verifiers import _Bridge

    bridge = _Bridge(answer_timeout=0.5)
    try:
        tag = bridge.open_episode()
        started = time.monotonic()
        status, body = _post(bridge.base_url, {"model": tag, "messages": []}, key=bridge.key)
        assert status == 504 and "0.5 s" in body["error"]["message"]
        assert time.monotonic() - started < 30
    finally:
        bridge.close()


@pytest.mark.parametrize("fault", ["raise", "hang"])
def test_a_failing_env_ends_only_its_episodes_and_verifiers_runner_goes_on(server, gem_plugins_catalog, fault):
    """Under verifiers' own episode runner, a GEM env whose step raises or hangs past the step timeout
    ends that episode (env_failure in the trace names the cause, its reward is what the env earned
    before), while episodes of a healthy env played at the same time score their real returns."""
    from adapter_kit import FAULT_STEP_TIMEOUT, FAULTS, register_faulty

    faulty = load_environment(register_faulty(gem_plugins_catalog.envs), num_tasks=2)
    faulty.config.step_timeout = FAULT_STEP_TIMEOUT
    healthy = load_environment(ENV_ID, num_tasks=2)

    async def both():
        return await asyncio.gather(play(faulty, f"constant:{FAULTS[fault][0]}", server.base_url),
                                    play(healthy, "bisect", server.base_url))

    failed, won = asyncio.run(both())
    assert all(e.ok for e in failed + won)
    for episode in failed:
        assert episode.traces[0].info["env_failure"]["type"] == FAULTS[fault][2]
        assert episode.traces[0].rewards[REWARD].score == 0.0 and episode.traces[0].info["env_turns"] == 1
    assert scores(won) == [(seed, *gem_return(seed, "bisect")) for seed in (0, 1)]
