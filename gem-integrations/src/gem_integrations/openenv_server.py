"""``gem serve``: any registered GEM env as an OpenEnv-compatible server.

Built on OpenEnv's own server (``openenv.core.env_server.create_app``; extra
``gem-integrations[serve]``, tested with openenv 0.10.0). Each WebSocket session (``/ws``, what
OpenEnv's ``GenericEnvClient`` speaks) gets its own env, built from the id and wrapper
names, so concurrent sessions never share state; ``--max-sessions`` caps them. A session
ends when its connection closes, or when its client has sent nothing for
``--session-timeout`` seconds (the server then sends an error frame and closes the socket;
a step still running is not idle time). A ``/ws`` connection is the only way to a
session: OpenEnv's HTTP MCP sessions (``POST /mcp`` ``openenv/session/create``) outlive
their connection and ``/mcp`` serves MCP tools a GEM env does not have, so ``/mcp`` is
refused, as is attaching a second socket to a session (``/ws?session_id=``). HTTP
``/reset`` and ``/step`` are request-scoped in OpenEnv (a fresh env per call), so
multi-turn episodes need ``/ws``.

The wire format (examples/openenv/README.md, "Protocol", gives every message): on ``/ws`` a
client sends JSON objects ``{"type": "reset", "data": {"seed": 0}}``, ``{"type": "step",
"data": {"action": "<text>"}}``, ``{"type": "state"}`` and ``{"type": "close"}``; the server
answers ``{"type": "observation", "data": {...}}``, ``{"type": "state", "data": {...}}`` or
``{"type": "error", "data": {"message": ..., "code": ...}}``. Any string is a legal action (a
malformed one is a format error with its reward, as in GEM); an observation holds
``observation`` (the env's text, or the chat messages with the ``messages`` wrapper), ``info``
(the step's info, JSON-safe), ``terminated`` and ``truncated``, with OpenEnv's ``reward`` and
``done`` (``terminated or truncated``). Anything a client does wrong (a frame that is not such
an object, an action that is not a string, a step before ``reset`` or after the episode ended)
is answered with an error message that says what to send, on the same socket, which stays
open. Over HTTP, the same mistakes are 4xx answers whose body says why (a ``/step`` has no
episode to step: 409).

    gem serve game:GuessTheNumber-v0-easy --port 8000 --max-sessions 32

>>> from openenv import GenericEnvClient                           # doctest: +SKIP
>>> with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
...     result = env.reset(seed=0)
...     result = env.step({"action": "\\\\boxed{50}"})
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import socket
import sys
from typing import Any

from gem.core import Env
from gem.host.hosted import DEFAULT_STEP_TIMEOUT, HostedEnv

try:  # pydantic and starlette come with openenv
    from openenv.core.env_server import Action, Environment, Observation, State, create_app
    from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcResponse
    from openenv.core.env_server.types import WSErrorCode, WSErrorResponse
    from pydantic import Field
    from starlette.datastructures import QueryParams
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
    from starlette.websockets import WebSocket
except ImportError as exc:
    # name="openenv" marks it for `gem serve`, which prints it as its one-line answer
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    raise ImportError(f"gem serve needs OpenEnv ({reason}); install it from a clone of the GEM repo: "
                      "pip install -e gem-core -e 'gem-integrations[serve]'", name="openenv") from exc

#: the OpenEnv release this server was written and tested against (the extra gem-integrations[serve] pins it)
TESTED_OPENENV = "0.10.0"

#: seconds a session's client may stay silent before the server closes the session
DEFAULT_SESSION_TIMEOUT = 600.0
#: what a /ws client sends, quoted by every error about a malformed frame
ENVELOPE = ('send JSON objects {"type": "reset", "data": {"seed": 0}}, then {"type": "step", "data": {"action": '
            '"<text>"}}; also {"type": "state"} and {"type": "close"} (examples/openenv/README.md, "Protocol")')
_TYPES = ("reset", "step", "state", "close")


class EpisodeStateError(RuntimeError):
    """A step with no episode to step (before ``reset``, after the end, or over request-scoped HTTP):
    an error message on ``/ws``, a 409 over HTTP."""


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

    def __init__(self, env_id: str, wrappers: str | None = None, env_kwargs: dict[str, Any] | None = None,
                 step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> None:
        super().__init__()
        # behind the host: a step that raises or hangs ends this session's episode (truncated, info["failure"]),
        # never the server or another session
        self.env = HostedEnv(functools.partial(build_env, env_id, wrappers, env_kwargs), env_id=env_id,
                             step_timeout=step_timeout)
        self._state = GemState(env_id=env_id)
        self._started = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GemObservation:
        obs, info = self.env.reset(seed=seed)
        self._state = GemState(env_id=self._state.env_id, episode_id=episode_id, seed=seed)
        self._started = True
        if self.env.failure is not None:  # the episode could not begin
            self._state.done = True
            return GemObservation(observation=_jsonable(obs), info=_jsonable(info), done=True, truncated=True)
        return GemObservation(observation=_jsonable(obs), info=_jsonable(info))

    def step(self, action: GemAction, timeout_s: float | None = None, **kwargs: Any) -> GemObservation:
        if not self._started:
            raise EpisodeStateError(
                "no episode: send a reset first (over HTTP every call gets a fresh env, so POST /step has no episode "
                "to step: play over /ws; a /ws session whose client was silent for longer than the server's "
                "--session-timeout is closed, and the client's next call opens a new one)")
        if self._state.done:
            raise EpisodeStateError("the episode is over: send a reset to start the next one")
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
             max_sessions: int = 16, session_timeout: float = DEFAULT_SESSION_TIMEOUT,
             step_timeout: float | None = DEFAULT_STEP_TIMEOUT) -> Any:
    """The FastAPI app serving ``env_id``. The env is built once here, so an unknown id,
    a bad wrapper name or bad ``env_kwargs`` fail now, not in the first session.
    ``session_timeout``: seconds of client silence after which a session is closed (0: never).
    ``step_timeout``: seconds a reset or step may take before its episode ends truncated."""
    build_env(env_id, wrappers, env_kwargs).close()
    factory = functools.partial(GemEnvironment, env_id, wrappers, env_kwargs, step_timeout)
    app = create_app(factory, GemAction, GemObservation, env_name=env_id, max_concurrent_envs=max_sessions,
                     state_cls=GemState)
    app.add_middleware(SessionPolicy, idle_timeout_s=session_timeout or None)
    app.add_exception_handler(EpisodeStateError, _conflict)
    return app


async def _conflict(request: Request, exc: Exception) -> Response:
    return JSONResponse({"detail": str(exc)}, status_code=409)


class SessionPolicy:
    """ASGI middleware around OpenEnv's app: a session exists only while its ``/ws``
    connection is open and its client not silent for longer than ``idle_timeout_s``.

    OpenEnv's own idle reaper (``ConcurrencyConfig.session_timeout``) is not used: it closes
    a ``/ws`` session's env but leaves its socket open, so the client plays on with an env
    no slot counts, and it counts a long ``step`` as idle time.
    """

    def __init__(self, app: ASGIApp, idle_timeout_s: float | None) -> None:
        self.app = app
        self.idle_timeout_s = idle_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/") == "/mcp":
            return await _refuse_mcp_request(scope, receive, send)
        if scope["type"] == "websocket" and scope["path"].rstrip("/") == "/mcp":
            return await _refuse_socket(scope, receive, send, _mcp_refusal(None))
        if scope["type"] == "websocket" and QueryParams(scope.get("query_string", b"")).get("session_id"):
            return await _refuse_socket(scope, receive, send, _ws_error(
                "gem serve keeps one session per /ws connection; connect to /ws without session_id"))
        if scope["type"] == "websocket":
            receive = _checked_frames(receive, send)
        if scope["type"] == "websocket" and self.idle_timeout_s:
            receive = _expiring(receive, send, self.idle_timeout_s)
        await self.app(scope, receive, send)


def _frame_problem(text: str) -> tuple[str, WSErrorCode] | None:
    """What is wrong with a client's /ws frame, or None: OpenEnv's own checks fail on a frame that is
    JSON but not an object (its session ends) and name no fix."""
    try:
        frame = json.loads(text)
    except ValueError as exc:
        return f"not JSON ({exc}); {ENVELOPE}", WSErrorCode.INVALID_JSON
    if not isinstance(frame, dict):
        return f"a message is a JSON object, not {type(frame).__name__}; {ENVELOPE}", WSErrorCode.INVALID_JSON
    kind = frame.get("type")
    if kind not in _TYPES:
        return f"unknown message type {kind!r}; {ENVELOPE}", WSErrorCode.UNKNOWN_TYPE
    extra = sorted(set(frame) - {"type", "data"})
    if extra:
        return (f"unexpected field(s) {', '.join(map(repr, extra))} beside \"type\": a {kind}'s parameters go in "
                f"\"data\"; {ENVELOPE}", WSErrorCode.VALIDATION_ERROR)
    data = frame.get("data", {})
    if not isinstance(data, dict):
        return f"\"data\" is a JSON object, not {type(data).__name__}; {ENVELOPE}", WSErrorCode.VALIDATION_ERROR
    if kind == "step" and not isinstance(data.get("action"), str):
        return ('a step\'s data is {"action": "<text>"}, the action a string (any string is legal); '
                f"{ENVELOPE}", WSErrorCode.VALIDATION_ERROR)
    return None


def _checked_frames(receive: Receive, send: Send) -> Receive:
    """``receive`` that answers a malformed client frame itself, with an error message saying what to send,
    and hands OpenEnv only well-formed ones: the socket stays open and the session goes on."""

    async def receive_checked() -> Message:
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return message
            text = message.get("text")
            problem = _frame_problem(text) if text is not None else (f"send text frames; {ENVELOPE}",
                                                                     WSErrorCode.INVALID_JSON)
            if problem is None:
                return message
            frame = WSErrorResponse(data={"message": problem[0], "code": problem[1]}).model_dump_json()
            await send({"type": "websocket.send", "text": frame})

    return receive_checked


def _mcp_refusal(request_id: Any) -> str:
    return JsonRpcResponse.error_response(
        JsonRpcErrorCode.METHOD_NOT_FOUND, "gem serve plays episodes over /ws (one session per connection); this "
        "env has no MCP tools and no HTTP sessions", request_id=request_id).model_dump_json()


def _ws_error(message: str) -> str:
    return WSErrorResponse(data={"message": message, "code": WSErrorCode.SESSION_ERROR}).model_dump_json()


async def _refuse_mcp_request(scope: Scope, receive: Receive, send: Send) -> None:
    try:
        request_id = json.loads(await Request(scope, receive).body()).get("id")
    except (ValueError, AttributeError):
        request_id = None
    if type(request_id) not in (str, int):  # JSON-RPC ids are strings or numbers
        request_id = None
    await Response(_mcp_refusal(request_id), media_type="application/json")(scope, receive, send)


async def _refuse_socket(scope: Scope, receive: Receive, send: Send, frame: str) -> None:
    socket = WebSocket(scope, receive, send)
    await socket.accept()
    await socket.send_text(frame)
    await socket.close(code=1008)


def _expiring(receive: Receive, send: Send, timeout_s: float) -> Receive:
    """``receive`` that, after ``timeout_s`` without a client message, tells the client why
    and reports a disconnect to OpenEnv, which then ends the session and closes the socket."""
    expired = False

    async def receive_or_expire() -> Message:
        nonlocal expired
        if not expired:
            try:
                return await asyncio.wait_for(receive(), timeout_s)
            except asyncio.TimeoutError:
                expired = True
                notice = _ws_error(f"session closed: its client sent nothing for {timeout_s:g} s (gem serve "
                                   "--session-timeout); connect again for a new session")
                with contextlib.suppress(OSError):  # the client left meanwhile: no one to tell
                    await send({"type": "websocket.send", "text": notice})
        return {"type": "websocket.disconnect", "code": 1000}

    return receive_or_expire


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gem serve",
        description="Serve a GEM env as an OpenEnv-compatible server (multi-turn episodes over /ws, one env per "
        "session).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("env_id", metavar="ENV_ID")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 exposes it to the network)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on")
    p.add_argument("--max-sessions", type=int, default=16, help="concurrent sessions (one env each)")
    p.add_argument("--session-timeout", type=float, default=DEFAULT_SESSION_TIMEOUT, metavar="SECONDS",
                   help="close a session whose client has sent nothing for this long, freeing its slot (a running "
                   "step is not idle time; 0: never)")
    p.add_argument("--step-timeout", type=float, default=DEFAULT_STEP_TIMEOUT, metavar="SECONDS",
                   help="a reset or step that raises or runs longer ends its session's episode, truncated, with "
                   "info['failure'] naming the cause (0: never)")
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
    if not (math.isfinite(args.session_timeout) and args.session_timeout >= 0):
        raise SystemExit("gem serve: --session-timeout must be a number of seconds >= 0 (0: sessions never expire)")
    if not (math.isfinite(args.step_timeout) and args.step_timeout >= 0):
        raise SystemExit("gem serve: --step-timeout must be a number of seconds >= 0 (0: steps are never cut off)")
    app = make_app(args.env_id, args.wrappers, args.env_kwargs, args.max_sessions, args.session_timeout,
                   args.step_timeout or None)
    listening = _listen(args.host, args.port)  # before the banner: a busy port is one line, not a banner then exit 3
    expiry = f"idle ones closed after {args.session_timeout:g} s" if args.session_timeout else "never expiring"
    print(f"gem serve: {args.env_id} on http://{args.host}:{args.port} (OpenEnv /ws, up to {args.max_sessions} "
          f"sessions, {expiry})", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listening])
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening; ``SystemExit`` with one line when it cannot be."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise SystemExit(f"gem serve: cannot listen on {host}:{port}: {why} (is another server on that port? "
                         "choose another with --port)") from None
