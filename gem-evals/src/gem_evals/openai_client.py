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

>>> model = OpenAIChatModel("gpt-4o-mini", "https://api.openai.com/v1")      # doctest: +SKIP
>>> await model.chat([{"role": "user", "content": "hi"}], Sampling())         # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
from collections.abc import Callable
from typing import Any

import httpx

from gem_evals.models import Completion, EndpointError, ModelSpecError, Sampling

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUS = {408, 409, 429}
_FATAL_STATUS = {401, 403, 404}
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class _Failure(Exception):
    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status, self.retry_after = status, retry_after

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
        timeout: float = 120.0,
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
        try:
            self.name = name if name is not None else self._served_model()
        except EndpointError:
            self._client.close()
            raise

    def _served_model(self) -> str:
        try:
            models = self._request("GET", "/models")
        except _Failure as exc:
            raise EndpointError(f"cannot list the models of {self.base_url}: {exc}", retryable=False) from None
        data = models.get("data") or []
        if not data:
            raise EndpointError(f"{self.base_url}/models lists no model; name one with --model openai:NAME")
        return str(data[0]["id"])

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        content = json.dumps(payload).encode() if payload is not None else None
        try:
            response = self._client.request(method, self.base_url + path, content=content)
            if response.status_code >= 400:
                raise _Failure(f"HTTP {response.status_code}: {_detail(response)}", response.status_code,
                               _retry_after(response))
            return response.json()
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
        retries = 0
        while True:
            payload[self._tokens_field] = sampling.max_tokens
            try:
                body = await _in_daemon_thread(self._request, "POST", "/chat/completions", payload)
                break
            except _Failure as exc:
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
                retries += 1
                await asyncio.sleep(min(delay, 60.0) * (0.5 + random.random() / 2))
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
