"""gem eval against the scripted OpenAI-compatible server: exact expected scores."""

import json
import urllib.request

import pytest

from gem.core import Wrapper
from gem.errors import GemError
from gem.testing.envs import CountEnv
from gem_evals import EvalConfig, evaluate
from gem_evals.metrics import pass_at_k
from gem_evals.policy import request_seed
from gem_evals.records import EpisodeKey
from gem_evals.testing_server import ScriptedServer, hinted_range, scripted_reply


@pytest.fixture
def server():
    with ScriptedServer() as s:
        yield s


def replay(script, seed, episode, sample=0, base_seed=0, max_turns=3, system_prompt=None):
    """Play one episode without gem eval: the scripted answers fed straight to the env."""
    env = CountEnv(max_turns=max_turns)
    obs, _ = env.reset(seed=seed)
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": obs})
    key = EpisodeKey("test:Count-v0", episode, sample)
    rewards, info = [], {}
    while True:
        reply = scripted_reply(script, messages, request_seed(base_seed, key, len(rewards)))
        obs, reward, terminated, truncated, info = env.step(reply)
        rewards.append(reward)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": obs}]
        if terminated or truncated:
            return {"success": bool(info.get("correct")), "return": sum(rewards), "turns": len(rewards),
                    "messages": messages[:-1]}


def config(server, tmp_path, model="bisect", **kw):
    kw.setdefault("env_kwargs", {"max_turns": 3})
    kw.setdefault("output", tmp_path / "out")
    return EvalConfig(["test:Count-v0"], model=f"openai:{model}", base_url=server.base_url, progress=False, **kw)


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_bisect_scores_exactly_what_the_script_earns(count_registry, server, tmp_path):
    result = evaluate(config(server, tmp_path, episodes=24, concurrency=8, seed=100,
                             system_prompt="Answer in \\boxed{}."))
    records = {r["episode"]: r for r in read_jsonl(result.output / "episodes.jsonl")}
    assert sorted(records) == list(range(24))
    expected = {e: replay("bisect", 100 + e, e, system_prompt="Answer in \\boxed{}.") for e in range(24)}
    for e, rec in records.items():
        assert rec["seed"] == 100 + e and rec["sample"] == 0 and rec["error"] is None
        assert (rec["success"], rec["return"], rec["turns"]) == (expected[e]["success"], expected[e]["return"],
                                                                 expected[e]["turns"])
        assert rec["messages"] == expected[e]["messages"]
        assert rec["actions"] == [m["content"] for m in rec["messages"] if m["role"] == "assistant"]
        assert rec["requests"] == rec["turns"] == len(rec["timings"]["act_seconds"])
        # the scripted server counts words as tokens
        assert rec["tokens"]["completion"] == rec["turns"]
        chat = expected[e]["messages"]
        assert rec["tokens"]["prompt"] == sum(len(" ".join(m["content"] for m in chat[:i]).split())
                                              for i, m in enumerate(chat) if m["role"] == "assistant")
    successes = sum(x["success"] for x in expected.values())
    assert 0 < successes < 24  # three turns are not always enough on 1..10: the scores are not trivial
    [row] = result.summaries
    assert row["successes"] == successes and row["rollouts"] == 24 and row["errors"] == 0
    assert row["mean_turns"] == pytest.approx(sum(x["turns"] for x in expected.values()) / 24)
    assert server.answered == sum(x["turns"] for x in expected.values())
    assert json.loads((result.output / "summary.json").read_text())["envs"] == result.summaries
    assert "| test:Count-v0 | 24 |" in (result.output / "summary.md").read_text()


def test_samples_give_avg_and_pass_at_k(count_registry, server, tmp_path):
    result = evaluate(config(server, tmp_path, model="random", episodes=6, samples=4, temperature=1.0))
    records = read_jsonl(result.output / "episodes.jsonl")
    assert len(records) == 24 and len({(r["episode"], r["sample"]) for r in records}) == 24
    wins = {e: [replay("random", e, e, s)["success"] for s in range(4)] for e in range(6)}
    for r in records:
        assert r["success"] == wins[r["episode"]][r["sample"]]
    [row] = result.summaries
    assert row["success_rate"] == pytest.approx(sum(map(sum, wins.values())) / 24)
    for k in (1, 2, 4):
        assert row[f"pass@{k}"] == pytest.approx(sum(pass_at_k(4, sum(w), k) for w in wins.values()) / 6)
    # samples of one episode are sampled with different seeds, so they differ somewhere
    assert any(len({tuple(r["actions"]) for r in records if r["episode"] == e}) > 1 for e in range(6))


def test_failed_requests_are_retried_and_counted(count_registry, tmp_path):
    # every failure is followed by a retry unless a request gives up, which with concurrent
    # episodes can happen (six failures in a row, five retries); a large budget rules it out
    with ScriptedServer(fail_every=3) as flaky:
        result = evaluate(config(flaky, tmp_path, episodes=12, concurrency=4, retry_backoff=0.001, max_retries=50))
        failures = flaky.failures
    [row] = result.summaries
    assert failures > 0 and row["retries"] == failures and row["errors"] == 0
    assert row["successes"] == sum(replay("bisect", e, e)["success"] for e in range(12))


def test_an_endpoint_that_is_down_stops_the_run_and_a_later_run_plays_every_episode(count_registry, tmp_path):
    down = ScriptedServer()
    port = down._httpd.server_address[1]
    down.stop()  # nothing listens on the port now: connections are refused
    cfg = EvalConfig(["test:Count-v0"], model="openai:bisect", base_url=f"http://127.0.0.1:{port}/v1",
                     episodes=5, max_retries=2, retry_backoff=0.001, progress=False, output=tmp_path / "out")
    with pytest.raises(GemError, match="all 5 episodes of test:Count-v0 ended in the same error: .*"
                                       "gave up after 2 retries: .*Connection refused"):
        evaluate(cfg)
    path = tmp_path / "out" / "episodes.jsonl"
    assert not path.exists() or path.read_text() == ""  # a stopped run keeps no failures to count
    with ScriptedServer(port=port) as up:
        second = evaluate(cfg)
        assert up.answered > 0
    assert second.ran == 5 and second.resumed == 0
    [row] = second.summaries
    assert row["errors"] == 0 and row["successes"] == 5  # bisect always wins 1..10 in 4 turns


def test_episodes_lost_to_a_flaky_endpoint_are_errors_and_resume_replays_them(count_registry, tmp_path):
    # every 5th request fails and is not retried: one episode played serially in two ends in an error
    cfg = dict(episodes=10, concurrency=1, max_retries=0, env_kwargs={})
    with ScriptedServer(fail_every=5) as flaky:
        first = evaluate(config(flaky, tmp_path, **cfg))
    [row] = first.summaries
    assert first.errors == {"endpoint": row["errors"]} and 0 < row["errors"] < 10 and row["successes"] > 0
    records = read_jsonl(tmp_path / "out" / "episodes.jsonl")
    lost = {r["episode"] for r in records if r["error_kind"] == "endpoint"}
    assert all("HTTP 503" in r["error"] for r in records if r["episode"] in lost)
    with ScriptedServer() as up:
        second = evaluate(config(up, tmp_path, **cfg))
    assert second.ran == len(lost) and second.resumed == 10 - len(lost)
    assert second.summaries[0]["errors"] == 0 and second.summaries[0]["successes"] == 10


def test_a_wrong_route_stops_the_evaluation_without_recording_episodes(count_registry, server, tmp_path):
    cfg = EvalConfig(["test:Count-v0"], model="openai:bisect", base_url=server.base_url[:-3] + "/nope",
                     episodes=8, progress=False, output=tmp_path / "out")
    with pytest.raises(GemError, match="HTTP 404"):
        evaluate(cfg)
    path = tmp_path / "out" / "episodes.jsonl"
    assert not path.exists() or path.read_text() == ""


def test_episodes_run_concurrently(count_registry, tmp_path):
    with ScriptedServer(delay=0.05) as slow:
        evaluate(config(slow, tmp_path, episodes=16, concurrency=8))
        assert slow.peak_in_flight > 1
    with ScriptedServer(delay=0.01) as serial:
        evaluate(config(serial, tmp_path, episodes=4, concurrency=1, output=tmp_path / "serial"))
        assert serial.peak_in_flight == 1


def test_rerun_skips_finished_episodes_and_extends(count_registry, server, tmp_path):
    evaluate(config(server, tmp_path, episodes=5))
    asked = server.requests
    again = evaluate(config(server, tmp_path, episodes=5))
    assert (again.ran, again.resumed, server.requests) == (0, 5, asked)
    more = evaluate(config(server, tmp_path, episodes=8))
    assert (more.ran, more.resumed) == (3, 5)
    assert len(read_jsonl(tmp_path / "out" / "episodes.jsonl")) == 8


def test_other_settings_in_the_same_folder_are_refused(count_registry, server, tmp_path):
    evaluate(config(server, tmp_path, episodes=2))
    with pytest.raises(GemError, match="temperature"):
        evaluate(config(server, tmp_path, episodes=2, temperature=0.5))
    fresh = evaluate(config(server, tmp_path, episodes=2, temperature=0.5, overwrite=True))
    assert fresh.ran == 2


def test_unknown_env_and_bad_model_specs_fail_before_any_request(count_registry, server, tmp_path):
    with pytest.raises(GemError, match="Did you mean"):
        evaluate(EvalConfig(["test:Cuont-v0"], model="openai:bisect", base_url=server.base_url,
                            output=tmp_path / "a"))
    with pytest.raises(GemError, match="vllm:PATH"):
        evaluate(EvalConfig(["test:Count-v0"], model="bisect", output=tmp_path / "b"))
    assert server.requests == 0


def test_a_url_model_takes_the_first_served_model(count_registry, server, tmp_path):
    result = evaluate(EvalConfig(["test:Count-v0"], model=server.base_url, episodes=3, progress=False,
                                 output=tmp_path / "out"))
    assert {r["model"] for r in read_jsonl(result.output / "episodes.jsonl")} == {"bisect"}


def test_scripted_server_speaks_the_chat_api(server):
    body = json.dumps({"model": "bisect", "messages": [
        {"role": "user", "content": "Guess a number between 1 and 100."},
        {"role": "assistant", "content": "\\boxed{50}"}, {"role": "user", "content": "Wrong, go lower."},
    ]}).encode()
    request = urllib.request.Request(server.base_url + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        answer = json.loads(response.read())
    assert answer["choices"][0]["message"]["content"] == "\\boxed{25}"
    assert answer["usage"]["completion_tokens"] == 1
    assert hinted_range([{"role": "user", "content": "between 1 and 10"}, {"role": "assistant", "content": "x"},
                         {"role": "user", "content": "go higher"}]) == (1, 10)


class FirstActionIsAToolCall(Wrapper):
    """A stand-in tool wrapper: the first action of an episode is a tool call (answered "ok")."""

    def reset(self, seed=None, **kwargs):
        self.calls = 0
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action):
        if self.calls == 0:
            self.calls += 1
            return "ok", 0.0, False, False, {"tool_used": True, "tool_use_counter": 1}
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "tool_use_counter": self.calls}


def test_wrappers_run_under_the_chat_history_and_tool_calls_are_counted(count_registry, gem_catalog, server,
                                                                         tmp_path):
    gem_catalog.wrappers.register("first_tool", FirstActionIsAToolCall)
    result = evaluate(config(server, tmp_path, episodes=6, wrappers="first_tool", env_kwargs={}))
    [row] = result.summaries
    assert row["mean_tool_calls"] == 1.0 and row["successes"] == 6
    for r in read_jsonl(result.output / "episodes.jsonl"):
        env_turns = replay("bisect", r["seed"], r["episode"], max_turns=4)["turns"]
        assert r["tool_calls"] == 1 and r["turns"] == env_turns + 1
        assert r["messages"][2] == {"role": "user", "content": "ok"}


def test_a_text_history_mode_sends_one_user_message(count_registry, server, tmp_path):
    result = evaluate(config(server, tmp_path, episodes=3, wrappers="concat_with_action"))
    for r in read_jsonl(result.output / "episodes.jsonl"):
        assert [m["role"] for m in r["messages"]] == ["user", "assistant"]
        assert r["messages"][0]["content"].startswith("Guess a number between 1 and 10")
    with pytest.raises(GemError, match="tokenizer"):
        evaluate(config(server, tmp_path, episodes=3, wrappers="concat_chat", output=tmp_path / "chat"))


def test_a_request_refused_before_any_answer_stops_the_evaluation(count_registry, server, tmp_path):
    with pytest.raises(GemError, match="HTTP 400: unknown script"):
        evaluate(config(server, tmp_path, model="no-such-script", episodes=4))
    # (counted by model: a request another test's evaluation left in flight may reach a server on a reused port)
    assert server.models["no-such-script"] >= 1 and server.answered <= sum(
        n for model, n in server.models.items() if model != "no-such-script")


def test_a_hung_env_step_or_a_slow_episode_is_a_timeout_failure_not_a_hang(count_registry, server, tmp_path):
    # the Faulty env hangs on the action "hang"; the "constant:hang" script answers it on the first turn
    count_registry.register("test:Hang-v0", "gem.testing.envs:FaultyEnv")
    result = evaluate(EvalConfig(["test:Hang-v0"], model="openai:constant:hang", base_url=server.base_url,
                                 progress=False, episodes=2, step_timeout=0.5, output=tmp_path / "step"))
    records = read_jsonl(tmp_path / "step" / "episodes.jsonl")
    assert [r["error_kind"] for r in records] == ["timeout", "timeout"] and not any(r["success"] for r in records)
    assert all(r["error"].startswith("StepTimeoutError") for r in records)
    assert result.summaries[0]["success_rate"] == 0.0
    with ScriptedServer(delay=0.3) as slow:
        evaluate(EvalConfig(["test:Count-v0"], model="openai:bisect", base_url=slow.base_url, progress=False,
                            episodes=1, env_kwargs={"high": 10**6, "max_turns": 50}, episode_timeout=0.5,
                            output=tmp_path / "episode"))
    (record,) = read_jsonl(tmp_path / "episode" / "episodes.jsonl")
    assert record["error_kind"] == "timeout" and record["error"].startswith("EpisodeTimeoutError")
