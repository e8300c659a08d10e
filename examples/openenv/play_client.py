"""Play a GEM env served by `gem serve` with OpenEnv's own client.

Start a server, then run this script against it:

    gem serve game:GuessTheNumber-v0-hard --port 8100 --max-sessions 8 &
    python examples/openenv/play_client.py --url http://127.0.0.1:8100 --episodes 4

The agent here is the game's scripted solver from gem-envs-games (it reads only the
public configuration of a local env of the same id); put your model where `act` is.
Each client is one OpenEnv WebSocket session with its own env on the server.
"""

from __future__ import annotations

import argparse
import time
import urllib.request

from openenv import GenericEnvClient

import gem


def wait_for_server(url: str, timeout_s: float) -> None:
    """Return once the server answers ``/health``: a `gem serve` started just before this
    script needs a few seconds to come up."""
    deadline = time.monotonic() + timeout_s
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a local server: no proxy in between
    while True:
        try:
            with direct.open(url.rstrip("/") + "/health", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing answers at {url} after {timeout_s:g} s: start `gem serve` first") from None
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gem serve address")
    parser.add_argument("--env", default="game:GuessTheNumber-v0-hard", help="the id the server serves")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0, help="episode i resets with seed SEED+i")
    parser.add_argument("--wait", type=float, default=60, help="seconds to wait for the server to come up")
    args = parser.parse_args()
    wait_for_server(args.url, args.wait)

    from gem_envs_games.solvers import solver_for

    solver = solver_for(gem.make(args.env))
    wins = 0
    with GenericEnvClient(base_url=args.url).sync() as client:
        for episode in range(args.episodes):
            solver.reset()
            result = client.reset(seed=args.seed + episode)
            turns, total = 0, 0.0
            while not result.done:
                act = solver.act(result.observation["observation"])
                result = client.step({"action": act})
                turns, total = turns + 1, total + (result.reward or 0.0)
            won = bool(result.observation["info"].get("correct"))
            wins += won
            print(f"episode {episode}: {'won' if won else 'lost'} in {turns} turns, return {total:.2f}")
    print(f"{wins}/{args.episodes} won")


if __name__ == "__main__":
    main()
