"""An OpenAI-compatible chat client on httpx, with retries and backoff.

Each request runs in a daemon thread of its own on one shared, pooled ``httpx.Client``:
the event loop's default pool is only a few threads on small machines, and a pool's
threads would hold an interrupted evaluation open until their requests time out; a
synchronous client also serves callers that start an event loop per request (a model
opponent inside an env step).
Connection errors, timeouts, 408, 409, 429 and 5xx answers are retried with
exponential backoff and jitter (``Retry-After`` is honoured); each retry is counted in
the :class:`~gem_evals.models.Completion`. 401, 403 and 404 stop the evaluation
(:attr:`EndpointError.fatal`): a wrong key or model name fails every request alike.

A wait is never silent (:func:`gem_evals.progress.notice`): a server that has not answered
the run's first request within :data:`WAITING_NOTICE_S` says so, every retry says why (a
timeout names ``--request-timeout``) and which retry of how many it is, and a server that
accepts connections but has answered nothing after :data:`HANG_STOP` timeouts of one request
stops the run (fatal) instead of timing out every episode in turn.

>>> model = OpenAIChatModel("gpt-4o-mini", "https://api.openai.com/v1")      # doctest: +SKIP
>>> await model.chat([{"role": "user", "content": "hi"}], Sampling())         # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from gem_evals.models import DEFAULT_REQUEST_TIMEOUT, Completion, EndpointError, ModelSpecError, Sampling
from gem_evals.progress import notice

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUS = {408, 409, 429}
_FATAL_STATUS = {401, 403, 404}
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
#: seconds without any answer yet before the run says it is waiting for the server
WAITING_NOTICE_S = 15.0
#: timeouts of one request, with no request of the run answered yet, that stop the run: the server
#: accepts connections but never answers (a slow one answers some request first)
HANG_STOP = 3
#: the most seconds listing the server's models (/models) may take: it answers at once when the server is up
_LIST_TIMEOUT = 15.0
#: seconds between two retry notices: many requests in flight fail together, one line says it
_NOTICE_EVERY_S = 5.0


class _Failure(Exception):
    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None,
                 timed_out: bool = False) -> None:
        super().__init__(message)
        self.status, self.retry_after, self.timed_out = status, retry_after, timed_out

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status in _RETRY_STATUS or self.status >= 500


async def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> Any:
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            outcome = (True, fn(*args))
        except BaseException as exc:  # handed to the awaiting task
            outcome = (False, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass  # the loop is closed: nobody waits for this answer any more

    threading.Thread(target=work, name="gem-eval-http", daemon=True).start()
    return await future


class OpenAIChatModel:
    """Chats with ``POST {base_url}/chat/completions``; the API key comes from the
    environment variable ``api_key_env`` (none is sent when it is unset, as local
    servers expect). ``name=None`` asks the server's ``/models`` for the model to use."""

    def __init__(
        self,
        name: str | None,
        base_url: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        max_retries: int = 5,
        retry_backoff: float = 0.5,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.api_key = os.environ.get(api_key_env)
        if not self.api_key and self.base_url == DEFAULT_BASE_URL:
            raise ModelSpecError(f"the OpenAI API needs a key: set {api_key_env} (or name another variable "
                                 "with --api-key-env), or point --base-url at another server")
        self.max_retries, self.retry_backoff, self.timeout = max_retries, retry_backoff, timeout
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            host = httpx.URL(self.base_url).host
        except httpx.InvalidURL as exc:
            raise ModelSpecError(f"cannot read the endpoint {self.base_url!r}: {exc}") from None
        self._client = httpx.Client(
            headers=headers, timeout=timeout, follow_redirects=True,
            # one connection per request in flight, as many as the evaluation's concurrency asks for
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            # a proxy from the environment must not capture requests to this machine
            trust_env=host not in _LOOPBACK,
        )
        # OpenAI's reasoning models refuse max_tokens and want max_completion_tokens; switched on their first 400
        self._tokens_field = "max_tokens"
        #: requests answered so far (a server that answered once is slow when it times out, not hung)
        self.answered = 0
        self._waiting_noted = False
        self._last_notice = -_NOTICE_EVERY_S
        try:
            self.name = name if name is not None else self._served_model()
        except EndpointError:
            self._client.close()
            raise

    def _served_model(self) -> str:
        try:
            models = self._request("GET", "/models", timeout=min(self.timeout, _LIST_TIMEOUT))
        except _Failure as exc:
            raise EndpointError(f"cannot list the models of {self.base_url}: {exc}", retryable=False) from None
        data = models.get("data") or []
        if not data:
            raise EndpointError(f"{self.base_url}/models lists no model; name one with --model openai:NAME")
        return str(data[0]["id"])

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None,
                 timeout: float | None = None) -> dict[str, Any]:
        content = json.dumps(payload).encode() if payload is not None else None
        limit = self.timeout if timeout is None else timeout
        try:
            response = self._client.request(method, self.base_url + path, content=content, timeout=limit)
            if response.status_code >= 400:
                raise _Failure(f"HTTP {response.status_code}: {_detail(response)}", response.status_code,
                               _retry_after(response))
            return response.json()
        except httpx.TimeoutException as exc:
            what = "no answer" if isinstance(exc, httpx.ReadTimeout) else f"{type(exc).__name__}: no connection"
            flag = "--request-timeout" if timeout is None else "listing its models"
            raise _Failure(f"{what} within {limit:g} s ({flag})", timed_out=True) from None
        except (httpx.RequestError, httpx.InvalidURL, ValueError) as exc:
            # RequestError: refused connections, timeouts, broken answers; ValueError: a 200 whose body is not JSON
            raise _Failure(f"{type(exc).__name__}: {exc}") from None

    async def chat(self, messages: list[dict[str, str]], sampling: Sampling) -> Completion:
        payload: dict[str, Any] = {
            "model": self.name,
            "messages": messages,
            "temperature": sampling.temperature,
        }
        if sampling.top_p != 1.0:
            payload["top_p"] = sampling.top_p
        if sampling.seed is not None:
            payload["seed"] = sampling.seed
        retries = timeouts = 0
        while True:
            payload[self._tokens_field] = sampling.max_tokens
            try:
                body = await self._post(payload)
                self.answered += 1
                break
            except _Failure as exc:
                timeouts = timeouts + 1 if exc.timed_out else 0
                if timeouts >= HANG_STOP and not self.answered:
                    raise EndpointError(
                        f"{self.base_url} accepts connections but answered none of {timeouts} tries of one "
                        f"request ({exc}); check the server, or raise --request-timeout if it is only slow",
                        retries, fatal=True) from None
                if exc.status == 400 and self._tokens_field == "max_tokens" and "max_completion_tokens" in str(exc):
                    del payload["max_tokens"]
                    self._tokens_field = "max_completion_tokens"
                    continue
                if exc.status in _FATAL_STATUS:
                    raise EndpointError(f"{self.base_url}: {exc}", retries, fatal=True) from None
                if not exc.retryable:
                    raise EndpointError(str(exc), retries, retryable=False) from None
                if retries >= self.max_retries:
                    raise EndpointError(f"{self.base_url}: gave up after {retries} retries: {exc}", retries) from None
                # full jitter keeps many episodes from retrying in step
                delay = exc.retry_after if exc.retry_after is not None else self.retry_backoff * 2**retries
                delay = min(delay, 60.0) * (0.5 + random.random() / 2)
                retries += 1
                self._notice(f"{self.base_url}: {exc}; retry {retries} of {self.max_retries} in {delay:.1f} s")
                await asyncio.sleep(delay)
        try:
            choice = body["choices"][0]
            text = (choice.get("message") or {}).get("content") or ""
        except (KeyError, IndexError, TypeError):
            raise EndpointError(f"an answer without choices: {str(body)[:200]}", retries, retryable=False) from None
        usage = body.get("usage") or {}
        return Completion(
            text,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            finish_reason=str(choice.get("finish_reason") or "stop"),
            retries=retries,
        )

    async def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One chat request; says so once if the run's first answer is long in coming."""
        request = asyncio.ensure_future(_in_daemon_thread(self._request, "POST", "/chat/completions", payload))
        try:
            if not self.answered and not self._waiting_noted:
                await asyncio.wait({request}, timeout=min(WAITING_NOTICE_S, self.timeout))
                if not request.done() and not self.answered and not self._waiting_noted:
                    self._waiting_noted = True
                    notice(f"{self.base_url}: no answer yet after {min(WAITING_NOTICE_S, self.timeout):g} s; a "
                           f"request times out after {self.timeout:g} s (--request-timeout) and is retried up to "
                           f"{self.max_retries} times")
            return await request
        finally:
            # an episode cancelled (a run that stops) leaves no request task behind to fail unawaited ("Task
            # exception was never retrieved" logged in whatever ran next): one still running is cancelled, one that
            # failed just as the episode was cancelled has its failure taken here
            if not request.done():
                request.cancel()
            elif not request.cancelled():
                request.exception()

    def _notice(self, line: str) -> None:
        """A retry notice, at most one per :data:`_NOTICE_EVERY_S` (requests in flight fail together)."""
        now = time.monotonic()
        if now - self._last_notice >= _NOTICE_EVERY_S:
            self._last_notice = now
            notice(line)

    def close(self) -> None:
        """Close the pooled connections (requests still in flight fail)."""
        self._client.close()


def _detail(response: httpx.Response) -> str:
    """The server's error message: ``error.message`` of a JSON body, else the body's start."""
    detail = response.content[:1000].decode(errors="replace")
    try:
        return str(json.loads(detail)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return detail


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value else None
    except ValueError:
        return None
