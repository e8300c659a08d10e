"""A small MCP server for the tests: ``python mcp_server.py stdio`` or ``... http PORT``."""

import sys

try:
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("gem-tools-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(reason)


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        try:
            server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
        except TypeError:  # mcp 1.x: host and port are settings
            server.settings.host, server.settings.port = "127.0.0.1", int(sys.argv[2])
            server.run("streamable-http")
