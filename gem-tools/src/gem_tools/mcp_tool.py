"""The MCP tool: call the tools of an MCP server (official ``mcp`` SDK client).

Transports: stdio (the tool starts the server process) and streamable HTTP. The
connection lives on a private event-loop thread for the tool's lifetime, so sync
calls, async calls from any loop, and many envs sharing one tool all reuse one
session (and one server process).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from gem_tools.base import Tool, ToolCall, ToolResult
from gem_tools.parsing import find_json_call


def _transport(server: str, spec: Mapping[str, Any]) -> Callable[[], AbstractAsyncContextManager[Any]]:
    """How to open one server's connection, from its config entry."""
    transport = spec.get("transport", "http" if "url" in spec else "stdio")
    if transport in ("http", "streamable-http", "streamable_http") and "url" in spec:
        return _http_transport(spec["url"], spec.get("headers"))
    if transport == "stdio" and spec.get("command"):
        return _stdio_transport([spec["command"], *spec.get("args", [])], spec.get("env"), spec.get("cwd"))
    raise ValueError(
        f"MCP server {server!r}: need {{'url': ...}} (streamable HTTP) or {{'command': ..., 'args': [...]}} "
        f"(stdio); got {dict(spec)!r}"
    )


def _stdio_transport(command: Sequence[str], env: Mapping[str, str] | None, cwd: str | None):
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(env or {}) or None, cwd=cwd)
    return lambda: stdio_client(params)


def _http_transport(url: str, headers: Mapping[str, str] | None = None):
    try:
        from mcp.client.streamable_http import streamable_http_client as connect
    except ImportError:  # mcp 1.x before the rename, which takes headers itself
        from mcp.client.streamable_http import streamablehttp_client

        return lambda: streamablehttp_client(url, headers=dict(headers or {}) or None)
    if not headers:
        return lambda: connect(url)

    @asynccontextmanager
    async def connect_with_headers() -> AsyncIterator[Any]:
        import httpx

        # the SDK's own client settings (redirects, a long read timeout for streams)
        client = httpx.AsyncClient(headers=dict(headers), follow_redirects=True, timeout=httpx.Timeout(30, read=300))
        async with client, connect(url, http_client=client) as streams:
            yield streams

    return connect_with_headers


class _Connection:
    """One MCP session owned by a task on a private event-loop thread.

    ``callbacks`` are :class:`mcp.ClientSession`'s (``logging_callback``, ``sampling_callback``)."""

    def __init__(
        self,
        open_transport: Callable[[], AbstractAsyncContextManager[Any]],
        timeout: float,
        callbacks: Mapping[str, Any] | None = None,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gem-mcp", daemon=True)
        self.thread.start()
        self._ready: concurrent.futures.Future = concurrent.futures.Future()
        self._stop: asyncio.Event | None = None
        self._owner = asyncio.run_coroutine_threadsafe(self._own(open_transport, dict(callbacks or {})), self.loop)
        try:
            self.session, self.tools = self._ready.result(timeout)
        except BaseException:
            self.close()
            raise

    async def _own(self, open_transport: Callable[[], AbstractAsyncContextManager[Any]], callbacks: dict) -> None:
        from mcp import ClientSession

        self._stop = asyncio.Event()
        try:
            async with open_transport() as streams, ClientSession(streams[0], streams[1], **callbacks) as session:
                await session.initialize()
                tools, cursor = [], None
                while True:
                    page = await session.list_tools(params=_page(cursor)) if cursor else await session.list_tools()
                    tools += page.tools
                    cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
                    if not cursor:
                        break
                self._ready.set_result((session, tools))
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    def submit(self, coro: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        if not self.thread.is_alive():
            return
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._owner.result(timeout=10)
        except BaseException:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


#: the observation of a call whose result has no content (the reference's text)
NO_OUTPUT = "Tool execution completed with no output"


def _page(cursor: str) -> Any:
    from mcp import types

    return types.PaginatedRequestParams(cursor=cursor)


def _schema(tool: Any) -> dict[str, Any]:
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
    return dict(schema or {"type": "object", "properties": {}})


def _servers_of(config: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
    if "mcpServers" not in config and ("url" in config or "command" in config):
        return {"default": config}  # one server's entry, as the reference reads such a dict
    servers = config.get("mcpServers", config)
    if not isinstance(servers, Mapping) or not servers:
        raise ValueError("an MCP config needs {'mcpServers': {name: {'url': ...} or {'command': ...}}}")
    return servers


class MCPTool(Tool):
    """Expose MCP servers' tools to the agent as ``<tool_call>`` JSON calls.

    >>> tool = MCPTool(command=["python", "my_server.py"])          # doctest: +SKIP
    >>> tool = MCPTool(url="http://127.0.0.1:8000/mcp")            # doctest: +SKIP
    >>> tool = MCPTool.from_config("mcp_servers.json")             # doctest: +SKIP
    >>> tool.execute_action('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>')  # doctest: +SKIP
    ToolResult(parsed=True, has_error=False, observation='3', ...)

    The reference package's forms work too: ``MCPTool(config)`` (or ``config=``) with a
    URL, an ``{"mcpServers": {...}}`` dict or one server's entry as first argument,
    ``MCPTool.from_url(url)``, and its options: ``auth`` (a bearer token) and ``headers``
    for HTTP servers (``"headers"`` in a server's entry too), ``log_handler(params)`` for
    the server's log messages (silent by default), ``progress_handler(progress, total,
    message)`` during calls, ``sampling_handler(messages, params, context)`` answering the
    server's sampling requests with a string, ``execution_timeout`` (= ``timeout``),
    ``max_retries`` / ``delay_between_retries`` (for connecting: a call is never repeated,
    since a tool may have side effects), ``validate_on_init`` and ``num_workers``
    (accepted; ours always connects at construction, because the server's tool list
    decides which calls parse, and calls are concurrent on the one session).

    The observation is the server's text as it sent it (the reference's), text blocks
    joined by newlines; a failed call reads ``[Tool execution error: ...]`` (the server
    reported an error) or ``[Tool execution failed: ...]`` (no answer).

    ``servers`` maps server names to ``{"url": ...}`` (streamable HTTP) or ``{"command":
    ..., "args": [...], "env": {...}, "cwd": ...}`` (stdio); with several servers each
    tool is exposed as ``<server>_<tool>``. ``tool_names`` limits which tools the agent
    may call. Calls also parse in the reference's ``<tool_call><tool_name>…</tool_name>
    <arguments>…</arguments></tool_call>`` form. Call :meth:`close` (or use ``with``) to
    end the sessions and stdio servers.
    """

    name = "mcp"
    tool_type = "mcp"

    def __init__(
        self,
        url: str | Mapping[str, Any] | None = None,
        command: Sequence[str] | None = None,
        *,
        config: str | Mapping[str, Any] | None = None,
        servers: Mapping[str, Mapping[str, Any]] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        tool_names: Sequence[str] | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        auth: str | None = None,
        headers: Mapping[str, str] | None = None,
        log_handler: Callable[[Any], Any] | None = None,
        progress_handler: Callable[[float, float | None, str | None], Any] | None = None,
        sampling_handler: Callable[[Any, Any, Any], Any] | None = None,
        max_retries: int = 3,
        delay_between_retries: float = 1.0,
        execution_timeout: float | None = None,
        validate_on_init: bool = True,
        num_workers: int = 1,
    ) -> None:
        del validate_on_init, num_workers  # see the class docstring
        if config is not None:
            if url is not None:
                raise ValueError("MCPTool: pass the server as url= or config=, not both")
            url = config
        if isinstance(url, Mapping):  # the reference's MCPTool(config_dict)
            url, servers = None, _servers_of(url)
        if sum(x is not None for x in (url, command, servers)) != 1:
            raise ValueError(
                "MCPTool needs exactly one of url= (streamable HTTP), command= (a stdio server) or servers="
            )
        if servers is None:
            command = list(command or ())
            spec = {"url": url, "headers": _headers(auth, headers)} if url is not None else {
                "command": command[0], "args": command[1:], "env": env, "cwd": cwd}  # fmt: skip
            servers = {"default": spec}
        elif auth is not None or headers is not None:
            raise ValueError("MCPTool: auth= and headers= go with a URL; in a config, give each server its 'headers'")
        self.timeout = timeout if execution_timeout is None else execution_timeout
        self._progress = _async_handler(progress_handler) if progress_handler else None
        callbacks = _session_callbacks(log_handler, sampling_handler)
        self._connections: list[_Connection] = []
        #: exposed tool name -> (its session, the server's name for it, the tool's description)
        self._routes: dict[str, tuple[_Connection, str, Any]] = {}
        wanted = set(tool_names) if tool_names is not None else None
        try:
            for server, spec in servers.items():
                connection = _connect(_transport(server, spec), connect_timeout, callbacks, max_retries,
                                      delay_between_retries)  # fmt: skip
                self._connections.append(connection)
                for tool in connection.tools:
                    exposed = tool.name if len(servers) == 1 else f"{server}_{tool.name}"
                    if wanted is None or exposed in wanted:
                        self._routes[exposed] = (connection, tool.name, tool)
            if not self._routes:
                raise ValueError(f"the MCP server(s) offer none of the requested tools {sorted(wanted or [])}")
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_config(cls, config: str | os.PathLike | Mapping[str, Any], **kwargs: Any) -> MCPTool:
        """From the common ``{"mcpServers": {name: {...}}}`` config (a dict or a JSON file),
        or a server URL."""
        if isinstance(config, str) and config.startswith(("http://", "https://")):
            return cls(url=config, **kwargs)
        if not isinstance(config, Mapping):
            with open(config, encoding="utf-8") as f:
                config = json.load(f)
        return cls(servers=_servers_of(config), **kwargs)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> MCPTool:
        """One streamable-HTTP server (the reference's constructor of that name)."""
        return cls(url=url, **kwargs)

    @classmethod
    def from_config_file(cls, config_path: str | os.PathLike, **kwargs: Any) -> MCPTool:
        """From a JSON config file (the reference's constructor of that name)."""
        return cls.from_config(config_path, **kwargs)

    @classmethod
    def from_local_command(cls, server_params: Mapping[str, Any], name: str = "default", **kwargs: Any) -> MCPTool:
        """One stdio server, ``{"command": ..., "args": [...], "env": {...}}`` (the reference's)."""
        return cls(servers={name: server_params}, **kwargs)

    @classmethod
    def from_multi_server(cls, servers: Mapping[str, str], **kwargs: Any) -> MCPTool:
        """Several HTTP servers, ``{name: url}`` (the reference's)."""
        return cls(servers={name: {"url": url} for name, url in servers.items()}, **kwargs)

    @property
    def server_tools(self) -> dict[str, Any]:
        """Exposed tool name -> the server's tool description."""
        return {name: route[2] for name, route in self._routes.items()}

    # -- protocol ---------------------------------------------------------------------
    def parse(self, action: str) -> ToolCall | None:
        call = find_json_call(action, set(self._routes))
        return None if call is None else ToolCall(call.name, call.arguments, action[: call.end])

    def execute(self, call: ToolCall) -> ToolResult:
        connection = self._routes[call.name][0]
        return connection.submit(self._call(call)).result()

    async def aexecute(self, call: ToolCall) -> ToolResult:
        connection = self._routes[call.name][0]
        return await asyncio.wrap_future(connection.submit(self._call(call)))

    async def _call(self, call: ToolCall) -> ToolResult:
        connection, server_name, _ = self._routes[call.name]
        progress = {"progress_callback": self._progress} if self._progress else {}
        try:
            result = await asyncio.wait_for(
                connection.session.call_tool(server_name, call.arguments, **progress), timeout=self.timeout
            )
        except Exception as exc:
            return ToolResult(True, True, f"[Tool execution failed: {type(exc).__name__}: {exc}]", call.parsed_action)
        texts = [_content_text(block) for block in result.content]
        if getattr(result, "is_error", False) or getattr(result, "isError", False):
            return ToolResult(True, True, f"[Tool execution error: {' '.join(texts)}]", call.parsed_action)
        return ToolResult(True, False, "\n".join(texts) or NO_OUTPUT, call.parsed_action)

    def schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {"name": name, "description": tool.description or "", "parameters": _schema(tool)},
            }
            for name, (_, _, tool) in sorted(self._routes.items())
        ]

    def instruction_string(self) -> str:
        functions = "\n".join(json.dumps(s) for s in self.schemas())
        return (
            "You can call tools. Call one tool per message, as JSON inside <tool_call></tool_call> tags:\n"
            '<tool_call>\n{"name": "<tool name>", "arguments": {<arguments as JSON>}}\n</tool_call>\n'
            "The tool's result comes back as the next message.\n"
            f"Available tools:\n<tools>\n{functions}\n</tools>"
        )

    def close(self) -> None:
        for connection in self._connections:
            connection.close()

    def __enter__(self) -> MCPTool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _content_text(block: Any) -> str:
    text = getattr(block, "text", None)
    if isinstance(text, str):
        return text
    data = getattr(block, "data", None)
    if data is not None:
        return f"Binary data: {len(data)} bytes"
    return str(block)


def _headers(auth: str | None, headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """HTTP headers from the reference's ``auth`` (a bearer token) and ``headers``."""
    merged = dict(headers or {})
    if auth is not None:
        if not isinstance(auth, str):
            raise TypeError(f"MCPTool: auth= must be a bearer token string, got {type(auth).__name__}")
        merged["Authorization"] = f"Bearer {auth}"
    return merged or None


def _connect(
    open_transport: Callable[[], AbstractAsyncContextManager[Any]],
    timeout: float,
    callbacks: Mapping[str, Any],
    attempts: int,
    delay: float,
) -> _Connection:
    """A connection, trying up to ``attempts`` times: a server that is still starting is
    a common first failure."""
    for attempt in range(1, max(attempts, 1) + 1):
        try:
            return _Connection(open_transport, timeout, callbacks)
        except Exception:
            if attempt >= attempts:
                raise
            time.sleep(delay)
    raise AssertionError("unreachable")


def _async_handler(handler: Callable[..., Any]) -> Callable[..., Any]:
    """``handler`` as the coroutine function the SDK awaits (it may be sync or async)."""

    async def call(*args: Any) -> Any:
        result = handler(*args)
        return await result if inspect.isawaitable(result) else result

    return call


def _session_callbacks(log_handler: Callable | None, sampling_handler: Callable | None) -> dict[str, Any]:
    # without a log handler the server's log messages are dropped, as the reference does
    callbacks: dict[str, Any] = {"logging_callback": _async_handler(log_handler or (lambda params: None))}
    if sampling_handler is not None:
        handler = _async_handler(sampling_handler)

        async def sample(context: Any, params: Any) -> Any:
            from mcp import types

            reply = await handler(params.messages, params, context)
            if isinstance(reply, str):
                content = types.TextContent(type="text", text=reply)
                return types.CreateMessageResult(role="assistant", content=content, model="sampling_handler")
            return reply

        callbacks["sampling_callback"] = sample
    return callbacks
