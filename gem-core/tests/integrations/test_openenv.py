"""`gem serve` against OpenEnv's own client (GenericEnvClient over /ws) on 127.0.0.1.

Needs the extra gem-core[serve] and gem-envs-games (its solvers win the episodes);
skipped without them (nox -s "integration(framework='openenv')" installs both).
"""

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("openenv")
pytest.importorskip("gem_envs_games")
uvicorn = pytest.importorskip("uvicorn")
websockets = pytest.importorskip("websockets")

from openenv import GenericEnvClient  # noqa: E402

import gem  # noqa: E402
from gem.integrations.openenv_server import make_app  # noqa: E402
from gem_envs_games.solvers import solver_for  # noqa: E402

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
        ws = await websockets.connect(ws_url)
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
    server = subprocess.Popen([*gem_cli, "serve", GAME, "--port", str(port), "--max-sessions", "2",
                               "--wrappers", "concat_with_action"], stderr=subprocess.PIPE, text=True)
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
