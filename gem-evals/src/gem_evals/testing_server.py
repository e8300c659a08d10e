"""A scripted OpenAI-compatible chat server: exact, known answers for tests and smoke runs.

It speaks just enough of the API for ``gem eval`` (``POST /v1/chat/completions``, streamed
too when asked, and ``GET /v1/models``) and answers from a script chosen by the request's model name:

- ``bisect``: plays a guess-the-number game by binary search on the hints in the
  conversation (the range from "between A and B" in the first user message, then
  "higher" / "lower" after each guess);
- ``random``: guesses uniformly among the numbers the hints still allow, drawn with the
  request's ``seed`` (so equal requests get equal answers);
- ``constant:TEXT``: always answers ``TEXT``.

``delay`` slows every answer down; ``fail_every=n`` answers every n-th request with
HTTP 503, to exercise the client's retries. Run it from a shell to smoke-test an
evaluation without a model::

    python -m gem_evals.testing_server --port 8000
    gem eval game:GuessTheNumber-v0-easy --model http://127.0.0.1:8000/v1 --episodes 20

>>> with ScriptedServer() as server:                               # doctest: +SKIP
...     print(server.base_url)                                     # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCRIPTS = ("bisect", "random", "constant:TEXT")

_RANGE = re.compile(r"between\s+(-?\d+)\s+and\s+(-?\d+)")
_BOXED = re.compile(r"\\boxed\{\s*(-?\d+)\s*\}")


def hinted_range(messages: list[dict[str, Any]]) -> tuple[int, int]:
    """The numbers a guess-the-number conversation still allows: ``(low, high)``."""
    low, high, last_guess = 1, 100, None
    seen_user = False
    for message in messages:
        content = str(message.get("content") or "")
        if message.get("role") == "assistant":
            found = _BOXED.findall(content)
            last_guess = int(found[-1]) if found else None
        elif message.get("role") == "user":
            if not seen_user:
                seen_user = True
                match = _RANGE.search(content)
                if match:
                    low, high = int(match.group(1)), int(match.group(2))
                continue
            if last_guess is None:
                continue
            # "higher" / "lower" are the two hint words both CountEnv and GuessTheNumber use
            if re.search(r"\bhigher\b", content):
                low = max(low, last_guess + 1)
            elif re.search(r"\blower\b", content):
                high = min(high, last_guess - 1)
    return low, max(low, high)


def scripted_reply(model: str, messages: list[dict[str, Any]], seed: int | None = None) -> str:
    """What the script named ``model`` answers to ``messages``.

    >>> scripted_reply("bisect", [{"role": "user", "content": "Guess between 1 and 10."}])
    '\\\\boxed{5}'
    """
    if model.startswith("constant:"):
        return model[len("constant:"):]
    low, high = hinted_range(messages)
    if model == "bisect":
        return f"\\boxed{{{(low + high) // 2}}}"
    if model == "random":
        return f"\\boxed{{{random.Random(seed).randint(low, high)}}}"
    raise ValueError(f"unknown script {model!r}: use one of {', '.join(SCRIPTS)}")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, id: str, model: Any, reply: str) -> None:
        """The answer as an SSE stream (``"stream": true``, as agent programs such as verifiers' ask):
        the reply in one delta, then the finish reason, then ``[DONE]``."""
        chunk = {"id": id, "object": "chat.completion.chunk", "model": model}
        events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply},
                                         "finish_reason": None}]},
                  {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": "bisect", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        owner = self.server.owner
        with owner.lock:
            owner.requests += 1
            owner.models[str(body.get("model"))] += 1
            number = owner.requests
            owner.in_flight += 1
            owner.peak_in_flight = max(owner.peak_in_flight, owner.in_flight)
        try:
            if owner.delay:
                time.sleep(owner.delay)
            if owner.fail_every and number % owner.fail_every == 0:
                with owner.lock:
                    owner.failures += 1
                self._send(503, {"error": {"message": "scripted failure"}})
                return
            messages = body.get("messages") or []
            try:
                reply = scripted_reply(str(body.get("model", "bisect")), messages, body.get("seed"))
            except ValueError as exc:
                self._send(400, {"error": {"message": str(exc)}})
                return
            with owner.lock:
                owner.answered += 1
            prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
            completion_tokens = len(reply.split())
            if body.get("stream"):
                self._stream(f"chatcmpl-{number}", body.get("model"), reply)
                return
            self._send(200, {
                "id": f"chatcmpl-{number}",
                "object": "chat.completion",
                "model": body.get("model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens},
            })
        finally:
            with owner.lock:
                owner.in_flight -= 1


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # the default backlog of 5 drops connections when many episodes ask at once
    request_queue_size = 256
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that went away mid-answer (an interrupted or killed evaluation) is expected, not a server error
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class ScriptedServer:
    """The scripted server on ``host:port`` (port 0: a free one), in a background thread.

    Counters (``requests``, ``answered``, ``failures``, ``peak_in_flight``) let tests
    check what the client did.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, delay: float = 0.0, fail_every: int = 0) -> None:
        self.delay, self.fail_every = delay, fail_every
        self.lock = threading.Lock()
        self.requests = self.answered = self.failures = 0
        #: chat requests by the model they named
        self.models: collections.Counter[str] = collections.Counter()
        self.in_flight = self.peak_in_flight = 0
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedServer:
        # a short poll interval keeps stop() quick
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="scripted-server",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()  # waits for serve_forever, so only when it runs
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gem_evals.testing_server",
                                     description="A scripted OpenAI-compatible chat server for smoke tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before each answer")
    parser.add_argument("--fail-every", type=int, default=0, help="answer every n-th request with HTTP 503")
    args = parser.parse_args(argv)
    try:
        server = ScriptedServer(args.host, args.port, args.delay, args.fail_every)
    except OSError as exc:  # a busy port: one line, not a traceback
        print(f"python -m gem_evals.testing_server: cannot listen on {args.host}:{args.port}: "
              f"{exc.strerror or exc} (is another server on that port? choose another with --port)", file=sys.stderr)
        return 2
    # the line a parent process reads to learn the port
    print(f"serving {server.base_url} (models: {', '.join(SCRIPTS)})", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
