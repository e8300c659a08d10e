"""The MCP tool: call the tools of an MCP server (official ``mcp`` SDK client).

Transports: stdio (the tool starts the server process) and streamable HTTP. The
connection lives on a private event-loop thread for the tool's lifetime, so sync
calls, async calls from any loop, and many envs sharing one tool all reuse one
session (and one server process).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from gem_tools.base import Tool, ToolCall, ToolResult
from gem_tools.parsing import find_json_call


def _transport(server: str, spec: Mapping[str, Any]) -> Callable[[], AbstractAsyncContextManager[Any]]:
    """How to open one server's connection, from its config entry."""
    transport = spec.get("transport", "http" if "url" in spec else "stdio")
    if transport in ("http", "streamable-http", "streamable_http") and "url" in spec:
        return _http_transport(spec["url"])
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


def _http_transport(url: str):
    try:
        from mcp.client.streamable_http import streamable_http_client as connect
    except ImportError:  # mcp 1.x before the rename
        from mcp.client.streamable_http import streamablehttp_client as connect  # type: ignore[no-redef]
    return lambda: connect(url)


class _Connection:
    """One MCP session owned by a task on a private event-loop thread."""

    def __init__(self, open_transport: Callable[[], AbstractAsyncContextManager[Any]], timeout: float) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gem-mcp", daemon=True)
        self.thread.start()
        self._ready: concurrent.futures.Future = concurrent.futures.Future()
        self._stop: asyncio.Event | None = None
        self._owner = asyncio.run_coroutine_threadsafe(self._own(open_transport), self.loop)
        try:
            self.session, self.tools = self._ready.result(timeout)
        except BaseException:
            self.close()
            raise

    async def _own(self, open_transport: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        from mcp import ClientSession

        self._stop = asyncio.Event()
        try:
            async with open_transport() as streams, ClientSession(streams[0], streams[1]) as session:
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


def _page(cursor: str) -> Any:
    from mcp import types

    return types.PaginatedRequestParams(cursor=cursor)


def _schema(tool: Any) -> dict[str, Any]:
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
    return dict(schema or {"type": "object", "properties": {}})


def _servers_of(config: Mapping[str, Any]) -> Mapping[str, Mapping[str, Any]]:
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
    ToolResult(parsed=True, has_error=False, observation='\\n<mcp_result>\\n3\\n</mcp_result>\\n', ...)

    The reference package's forms work too: ``MCPTool(config)`` with a URL or an
    ``{"mcpServers": {...}}`` dict as first argument, ``MCPTool.from_url(url)``, and
    ``validate_on_init`` (accepted; ours always connects at construction, because the
    server's tool list decides which calls parse).

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
        servers: Mapping[str, Mapping[str, Any]] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        tool_names: Sequence[str] | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        validate_on_init: bool = True,
    ) -> None:
        del validate_on_init  # always validated: see the class docstring
        if isinstance(url, Mapping):  # the reference's MCPTool(config_dict)
            url, servers = None, _servers_of(url)
        if sum(x is not None for x in (url, command, servers)) != 1:
            raise ValueError(
                "MCPTool needs exactly one of url= (streamable HTTP), command= (a stdio server) or servers="
            )
        if servers is None:
            command = list(command or ())
            spec = {"url": url} if url is not None else {"command": command[0], "args": command[1:], "env": env,
                                                         "cwd": cwd}
            servers = {"default": spec}
        self.timeout = timeout
        self._connections: list[_Connection] = []
        #: exposed tool name -> (its session, the server's name for it, the tool's description)
        self._routes: dict[str, tuple[_Connection, str, Any]] = {}
        wanted = set(tool_names) if tool_names is not None else None
        try:
            for server, spec in servers.items():
                connection = _Connection(_transport(server, spec), connect_timeout)
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
        try:
            result = await asyncio.wait_for(
                connection.session.call_tool(server_name, call.arguments), timeout=self.timeout
            )
        except Exception as exc:
            text, error = f"[Tool execution failed: {type(exc).__name__}: {exc}]", True
        else:
            text = "\n".join(_content_text(block) for block in result.content) or "(no output)"
            error = bool(getattr(result, "is_error", False) or getattr(result, "isError", False))
        return ToolResult(True, error, f"\n<mcp_result>\n{text}\n</mcp_result>\n", call.parsed_action)

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
            "The result comes back inside <mcp_result></mcp_result>.\n"
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
        return f"[{getattr(block, 'type', 'binary')} content: {len(data)} bytes]"
    return str(block)
