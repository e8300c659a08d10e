"""``gem serve``: any registered GEM env as an OpenEnv-compatible server.

Built on OpenEnv's own server (``openenv.core.env_server.create_app``; extra
``gem-core[serve]``, tested with openenv 0.10.0). Each WebSocket session (``/ws``, what
OpenEnv's ``GenericEnvClient`` speaks) gets its own env, built from the id and wrapper
names, so concurrent sessions never share state; ``--max-sessions`` caps them. HTTP
``/reset`` and ``/step`` are request-scoped in OpenEnv (a fresh env per call), so
multi-turn episodes need ``/ws``.

The wire format: an action is ``{"action": "<text>"}`` (any string is a legal action,
as in GEM: a malformed one is a format error with its reward); an observation holds
``observation`` (the env's text, or the chat messages with the ``messages`` wrapper),
``info`` (the step's info, JSON-safe), ``terminated`` and ``truncated``, with OpenEnv's
``reward`` and ``done`` (``terminated or truncated``). A reset takes ``seed``.
Anything a client does wrong (an action that is not a string, a step before
``reset`` or after the episode ended, an env that raises) is answered with an OpenEnv
error message on the same socket, which stays open.

    gem serve game:GuessTheNumber-v0-easy --port 8000 --max-sessions 32

>>> from openenv import GenericEnvClient                           # doctest: +SKIP
>>> with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
...     result = env.reset(seed=0)
...     result = env.step({"action": "\\\\boxed{50}"})
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

try:
    from openenv.core.env_server import Action, Environment, Observation, State, create_app
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("gem serve needs OpenEnv: pip install 'gem-core[serve]'") from exc
from pydantic import Field

from gem.core import Env

#: the OpenEnv release this server was written and tested against
TESTED_OPENENV = "0.10.0"


class GemAction(Action):
    """One agent turn: the text the env's ``step`` receives."""

    action: str = Field(description="the agent's text; any string is legal")


class GemObservation(Observation):
    """What a GEM ``reset``/``step`` returned (``reward``/``done`` are OpenEnv's fields)."""

    observation: Any = Field(default="", description="the env's observation: text, or chat messages")
    info: dict[str, Any] = Field(default_factory=dict, description="the step's info, JSON-safe")
    terminated: bool = False
    truncated: bool = False


class GemState(State):
    """A session's episode so far (``episode_id``/``step_count`` are OpenEnv's fields)."""

    env_id: str = ""
    seed: int | None = None
    total_reward: float = 0.0
    done: bool = False


def _jsonable(value: Any) -> Any:
    # infos may hold numpy scalars or arbitrary objects: what JSON cannot hold is sent as its repr
    return json.loads(json.dumps(value, default=repr))


class GemEnvironment(Environment[GemAction, GemObservation, GemState]):
    """One session's GEM env behind OpenEnv's ``Environment`` interface."""

    # every session builds its own env from the id: nothing is shared between sessions
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, wrappers: str | None = None, env_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.env = build_env(env_id, wrappers, env_kwargs)
        self._state = GemState(env_id=env_id)
        self._started = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GemObservation:
        obs, info = self.env.reset(seed=seed)
        self._state = GemState(env_id=self._state.env_id, episode_id=episode_id, seed=seed)
        self._started = True
        return GemObservation(observation=_jsonable(obs), info=_jsonable(info))

    def step(self, action: GemAction, timeout_s: float | None = None, **kwargs: Any) -> GemObservation:
        if not self._started:
            raise RuntimeError("no episode: send a reset first")
        if self._state.done:
            raise RuntimeError("the episode is over: send a reset to start the next one")
        obs, reward, terminated, truncated, info = self.env.step(action.action)
        done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.total_reward += float(reward)
        self._state.done = done
        return GemObservation(observation=_jsonable(obs), info=_jsonable(info), reward=float(reward), done=done,
                              terminated=bool(terminated), truncated=bool(truncated))

    @property
    def state(self) -> GemState:
        return self._state

    def close(self) -> None:
        self.env.close()


def build_env(env_id: str, wrappers: str | None = None, env_kwargs: dict[str, Any] | None = None) -> Env:
    """``make(env_id, **env_kwargs)`` wrapped by the named wrappers (``get_wrapper_fns`` names)."""
    from gem.registration import make
    from gem.wrappers import apply_wrappers

    env = make(env_id, **(env_kwargs or {}))
    names = [w.strip() for w in (wrappers or "").split(",") if w.strip()]
    return apply_wrappers(env, names) if names else env


def make_app(env_id: str, wrappers: str | None = None, env_kwargs: dict[str, Any] | None = None,
             max_sessions: int = 16) -> Any:
    """The FastAPI app serving ``env_id``. The env is built once here, so an unknown id,
    a bad wrapper name or bad ``env_kwargs`` fail now, not in the first session."""
    import functools

    build_env(env_id, wrappers, env_kwargs).close()
    factory = functools.partial(GemEnvironment, env_id, wrappers, env_kwargs)
    return create_app(factory, GemAction, GemObservation, env_name=env_id, max_concurrent_envs=max_sessions,
                      state_cls=GemState)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gem serve",
        description="Serve a GEM env as an OpenEnv-compatible server (multi-turn episodes over /ws, one env per "
        "session).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("env_id", metavar="ENV_ID")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 exposes it to the network)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-sessions", type=int, default=16, help="concurrent sessions (one env each)")
    p.add_argument("--wrappers", help="wrapper names applied in order, e.g. messages or concat_with_action")
    p.add_argument("--env-kwargs", type=json.loads, default={}, metavar="JSON",
                   help='keyword arguments for the env, e.g. \'{"max_turns": 5}\'')
    return p


def main(argv: list[str]) -> int:
    """Entry point of ``gem serve``."""
    import uvicorn

    args = build_parser().parse_args(argv)
    if args.max_sessions < 1:
        raise SystemExit("gem serve: --max-sessions must be at least 1")
    app = make_app(args.env_id, args.wrappers, args.env_kwargs, args.max_sessions)
    print(f"gem serve: {args.env_id} on http://{args.host}:{args.port} (OpenEnv /ws, up to {args.max_sessions} "
          "sessions)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
