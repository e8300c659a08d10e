"""`gem serve` against OpenEnv's own client (GenericEnvClient over /ws) on 127.0.0.1.

Needs the extra gem-integrations[serve] and gem-envs-games (its solvers win the episodes);
skipped without them (nox -s "integration(framework='openenv')" installs both).
"""

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("openenv")
pytest.importorskip("gem_envs_games")
uvicorn = pytest.importorskip("uvicorn")
websockets = pytest.importorskip("websockets")

from openenv import GenericEnvClient  # noqa: E402

import gem  # noqa: E402
from gem_envs_games.solvers import solver_for  # noqa: E402
from gem_integrations.openenv_server import build_parser, make_app  # noqa: E402

GAME = "game:GuessTheNumber-v0-hard"


@pytest.fixture
def serve():
    """Start make_app(...) under uvicorn in a thread; returns its base URL."""
    servers = []

    def start(env_id, **kwargs):
        server = uvicorn.Server(uvicorn.Config(make_app(env_id, **kwargs), host="127.0.0.1", port=0,
                                               log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)


def play(base_url, env_id, seed, turns=None):
    """Play an episode over /ws with the game's solver; returns (observations, rewards, last result).
    The solver reads only the public configuration of a local env of the same id."""
    solver = solver_for(gem.make(env_id))
    solver.reset()
    with GenericEnvClient(base_url=base_url).sync() as client:
        result = client.reset(seed=seed)
        observations, rewards = [result.observation["observation"]], []
        while not result.done and (turns is None or len(rewards) < turns):
            result = client.step({"action": solver.act(observations[-1])})
            observations.append(result.observation["observation"])
            rewards.append(result.reward)
    return observations, rewards, result


def play_locally(env_id, seed):
    env, solver = gem.make(env_id), None
    solver = solver_for(env)
    solver.reset()
    obs, _ = env.reset(seed=seed)
    observations, rewards, done = [obs], [], False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(solver.act(obs))
        observations.append(obs)
        rewards.append(reward)
        done = terminated or truncated
    return observations, rewards


@pytest.mark.parametrize("env_id", [GAME, "game:Mastermind-v0-easy"])
def test_a_full_episode_is_won_with_the_solver_over_the_websocket(serve, env_id):
    base_url = serve(env_id)
    observations, rewards, last = play(base_url, env_id, seed=3)
    assert last.done and last.observation["terminated"] and last.observation["info"]["correct"]
    assert (observations, rewards) == play_locally(env_id, 3)  # the same game as a local env plays


def test_concurrent_sessions_are_isolated(serve):
    base_url = serve(GAME, max_sessions=8)
    results = {}

    def worker(seed):
        results[seed] = play(base_url, GAME, seed)[:2]

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results) == list(range(6))
    for seed, (observations, rewards) in results.items():
        assert (observations, rewards) == play_locally(GAME, seed)


def test_bad_actions_are_protocol_errors_and_the_session_goes_on(serve):
    base_url = serve(GAME)
    with GenericEnvClient(base_url=base_url).sync() as client:
        with pytest.raises(RuntimeError, match="send a reset first"):
            client.step({"action": "\\boxed{5}"})
        client.reset(seed=0)
        for bad in ({"action": 5}, {"text": "hi"}, {"action": "\\boxed{5}", "extra": 1}):
            with pytest.raises(RuntimeError, match="Server error"):
                client.step(bad)
        junk = client.step({"action": "no box here " * 1000})  # any string is legal: a format error, a reward
        assert junk.done and junk.reward == pytest.approx(-0.1)
        with pytest.raises(RuntimeError, match="episode is over"):
            client.step({"action": "\\boxed{5}"})
        again = client.reset(seed=1)
        assert not again.done and client.state()["step_count"] == 0


def test_a_client_that_disconnects_mid_episode_frees_its_session(serve):
    base_url = serve(GAME, max_sessions=1)
    ws_url = base_url.replace("http", "ws") + "/ws"

    async def abandon():
        ws = await websockets.connect(ws_url, proxy=None)
        await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        assert json.loads(await ws.recv())["type"] == "observation"
        await ws.send(json.dumps({"type": "step", "data": {"action": "\\boxed{10}"}}))
        ws.transport.abort()  # gone without a close frame, mid-episode

    asyncio.run(abandon())
    # the only session slot comes back: a new client plays a whole episode
    deadline = time.monotonic() + 20
    while True:
        try:
            _, rewards, last = play(base_url, GAME, seed=2)
            break
        except RuntimeError as exc:  # CAPACITY_REACHED until the server notices the dead socket
            assert "CAPACITY" in str(exc) and time.monotonic() < deadline
            time.sleep(0.2)
    assert last.done and rewards[-1] == 1.0


def post_mcp(base_url, request_id, method, params=None):
    """One JSON-RPC call to POST /mcp on a connection of its own, closed afterwards."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}).encode()
    request = urllib.request.Request(base_url + "/mcp", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as response:
        return json.loads(response.read())


def test_routes_that_would_hold_a_session_apart_from_its_connection_are_refused(serve):
    base_url = serve(GAME, max_sessions=2)
    ws_base = base_url.replace("http", "ws")
    for request_id in range(4):  # twice max-sessions: each would hold a slot for good
        answer = post_mcp(base_url, request_id, "openenv/session/create")
        assert answer["id"] == request_id and answer.get("result") is None
        assert "/ws" in answer["error"]["message"]
    assert "/ws" in post_mcp(base_url, 9, "tools/list")["error"]["message"]

    async def refused(url):
        async with websockets.connect(url, proxy=None) as ws:
            answer = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
        return answer

    assert "/ws" in asyncio.run(refused(ws_base + "/mcp"))["error"]["message"]
    attach = asyncio.run(refused(ws_base + "/ws?session_id=00000000-0000-0000-0000-000000000000"))
    assert attach["type"] == "error" and "without session_id" in attach["data"]["message"]
    # no slot was taken: max-sessions clients play at once
    with GenericEnvClient(base_url=base_url).sync() as first, GenericEnvClient(base_url=base_url).sync() as second:
        first.reset(seed=0)
        second.reset(seed=1)
        assert first.step({"action": "\\boxed{5}"}).reward is not None  # a live episode: no error


def test_abandoned_sessions_expire_and_a_new_client_plays(serve):
    base_url = serve(GAME, max_sessions=2, session_timeout=3.0)
    ws_url = base_url.replace("http", "ws") + "/ws"

    async def abandon_all_slots():
        # raw clients that reset and then say nothing (their library still answers the server's pings)
        silent = [await websockets.connect(ws_url, proxy=None) for _ in range(2)]
        for ws in silent:
            await ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
            assert json.loads(await ws.recv())["type"] == "observation"
        async with websockets.connect(ws_url, proxy=None) as third:
            assert json.loads(await third.recv())["data"]["code"] == "CAPACITY_REACHED"
        for ws in silent:  # past the timeout each is told why, then closed
            notice = json.loads(await asyncio.wait_for(ws.recv(), 60))
            assert notice["type"] == "error" and "--session-timeout" in notice["data"]["message"]
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)

    asyncio.run(abandon_all_slots())
    _, rewards, last = play(base_url, GAME, seed=2)
    assert last.done and rewards[-1] == 1.0


def test_an_expired_client_is_told_to_reset_and_then_plays_on_a_new_session(serve):
    base_url = serve(GAME, max_sessions=1, session_timeout=0.5)
    with GenericEnvClient(base_url=base_url).sync() as client:
        client.reset(seed=0)
        time.sleep(3)  # past the timeout: the server closes the session
        with pytest.raises(RuntimeError, match="send a reset first.*--session-timeout"):
            client.step({"action": "\\boxed{5}"})  # the client reconnected: a new session, no episode yet
        client.reset(seed=1)
        assert client.step({"action": "\\boxed{5}"}).reward is not None  # a live episode: no error


def test_a_step_that_outlasts_the_session_timeout_is_not_idle_time(serve, gem_registry):
    gem_registry.register("test:Slow-v0", "gem.testing.envs:SlowEnv", delay=1.0, high=10, max_turns=4)
    base_url = serve("test:Slow-v0", session_timeout=0.3)
    with GenericEnvClient(base_url=base_url).sync() as client:
        client.reset(seed=0)
        for _ in range(2):
            assert not client.step({"action": "\\boxed{0}"}).done  # 0 is never the number: the episode goes on
        assert client.state()["step_count"] == 2


def test_the_session_timeout_is_documented_in_the_help():
    text = " ".join(build_parser().format_help().split())
    assert "--session-timeout SECONDS" in text and "0: never" in text and "(default: 600.0)" in text


def test_sessions_beyond_max_sessions_are_refused_with_a_protocol_error(serve):
    base_url = serve(GAME, max_sessions=1)
    with GenericEnvClient(base_url=base_url).sync() as first:
        first.reset(seed=0)
        with GenericEnvClient(base_url=base_url).sync() as second, pytest.raises(RuntimeError, match="CAPACITY"):
            second.reset(seed=0)
        first.step({"action": "\\boxed{5}"})  # the first session is unaffected


def test_the_gem_serve_command(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gem_cli = [sys.executable, "-c", "import sys; from gem.cli import main; sys.exit(main())"]
    bad = subprocess.run([*gem_cli, "serve", "game:GuessTheNumbr-v0-hard"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode != 0 and "Did you mean" in bad.stderr
    negative = subprocess.run([*gem_cli, "serve", GAME, "--session-timeout", "-1"], capture_output=True, text=True,
                              timeout=120)
    assert negative.returncode != 0 and "--session-timeout must be" in negative.stderr
    server = subprocess.Popen([*gem_cli, "serve", GAME, "--port", str(port), "--max-sessions", "2",
                               "--session-timeout", "30", "--wrappers", "concat_with_action"],
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "gem serve did not come up"
                time.sleep(0.2)
        with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as client:
            client.reset(seed=0)
            result = client.step({"action": "\\boxed{7}"})
            assert "\\boxed{7}" in result.observation["observation"]  # the history wrapper's view
    finally:
        server.terminate()
        server.wait(30)


def test_the_example_client_wins_against_the_server(serve):
    base_url = serve(GAME, max_sessions=2)
    script = Path(__file__).parents[2] / "examples" / "openenv" / "play_client.py"
    run = subprocess.run([sys.executable, str(script), "--url", base_url, "--episodes", "2"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "2/2 won"


README = Path(__file__).resolve().parents[2] / "examples" / "openenv" / "README.md"
RESET = '{"type": "reset", "data": {"seed": 0}}'
STEP = '{"type": "step", "data": {"action": "\\\\boxed{5}"}}'
STATE = '{"type": "state"}'
CLOSE = '{"type": "close"}'


def test_the_documented_websocket_frames_play_and_mistakes_are_answered_on_an_open_socket(serve):
    """Issue 34, point 3: the protocol was undocumented, and "send reset with an optional seed" as a plain
    string closed the socket with "'str' object has no attribute 'get'". The README's frames, sent as
    written, play; each mistake is an error frame saying what to send, and the session goes on."""
    text = README.read_text()
    for frame in (RESET, STEP, STATE, CLOSE, '{"type": "reset", "seed": 1}'):
        assert f"`{frame}`" in text
    base_url = serve(GAME)

    async def session():
        answers = []
        async with websockets.connect(base_url.replace("http", "ws") + "/ws", proxy=None) as ws:
            for frame in ('"reset"', "reset", '{"type": "reset", "seed": 1}', '{"type": "play"}',
                          '{"type": "step", "data": {"action": 5}}', RESET, STEP, STATE):
                await ws.send(frame)
                answers.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
            await ws.send(CLOSE)
            with pytest.raises(websockets.ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), 30)
        return answers

    *mistakes, reset, step, state = asyncio.run(session())
    for answer in mistakes:
        assert answer["type"] == "error" and '{"type": "reset", "data": {"seed": 0}}' in answer["data"]["message"]
    assert "a reset's parameters go in \"data\"" in mistakes[2]["data"]["message"]
    assert "unknown message type 'play'" in mistakes[3]["data"]["message"]
    assert "the action a string" in mistakes[4]["data"]["message"]
    assert reset["type"] == "observation" and reset["data"]["done"] is False and reset["data"]["reward"] is None
    assert "Guess" in reset["data"]["observation"]["observation"]
    assert step["type"] == "observation" and step["data"]["reward"] is not None
    assert state["type"] == "state" and state["data"]["step_count"] == 1 and state["data"]["seed"] == 0


def test_http_mistakes_are_4xx_with_the_reason(serve):
    """POST /step without a live episode answered a bare 500 "Internal Server Error"."""
    base_url = serve(GAME)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def post(path, body):
        request = urllib.request.Request(base_url + path, data=body.encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with opener.open(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    text = README.read_text()
    assert '`{"seed": 0}`' in text and '`{"action": {"action": "\\\\boxed{5}"}}`' in text
    status, body = post("/reset", '{"seed": 0}')
    assert status == 200 and body["done"] is False and "Guess" in body["observation"]["observation"]
    status, body = post("/step", '{"action": {"action": "\\\\boxed{5}"}}')
    assert status == 409 and body["detail"].startswith("no episode: send a reset first") and "/ws" in body["detail"]
    status, body = post("/step", '{"action": {"action": 5}}')
    assert status == 422


def test_gem_serve_on_a_busy_port_is_one_line_and_no_banner():
    """Issue 34, point 6: gem serve printed its "serving on" banner, then failed to bind (exit 3)."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        gem_cli = [sys.executable, "-c", "import sys; from gem.cli import main; sys.exit(main())"]
        done = subprocess.run([*gem_cli, "serve", GAME, "--port", str(port)], capture_output=True, text=True,
                              timeout=120)
    assert done.returncode != 0
    [line] = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith(f"gem serve: cannot listen on 127.0.0.1:{port}:") and "--port" in line


@pytest.mark.parametrize("fault", ["raise", "hang"])
def test_a_failing_step_ends_only_its_sessions_episode_within_the_step_timeout(serve, gem_registry, fault):
    """A served env whose step raises or hangs ends that session's episode (truncated, info["failure"]
    naming the cause) within --step-timeout; the session plays its next episode and another session
    was never held up."""
    from adapter_kit import FAULT_STEP_TIMEOUT, FAULTS, assert_ended_by, register_faulty

    base_url = serve(register_faulty(gem_registry), step_timeout=FAULT_STEP_TIMEOUT)
    with GenericEnvClient(base_url=base_url).sync() as client, GenericEnvClient(base_url=base_url).sync() as other:
        client.reset(seed=0)
        other.reset(seed=0)
        result = client.step({"action": FAULTS[fault][0]})
        assert result.done and result.observation["truncated"] and result.reward == 0.0
        assert_ended_by(result.observation["info"], fault)
        assert not other.step({"action": "\\boxed{0}"}).done  # the other session plays on
        client.reset(seed=0)
        assert client.step({"action": "\\boxed{0}"}).reward is not None  # so does this one, on a fresh env


def test_the_step_timeout_is_documented_in_the_help():
    text = " ".join(build_parser().format_help().split())
    assert "--step-timeout SECONDS" in text and "(default: 300.0)" in text
