"""An MCP server for the reference-option tests: ``python mcp_options_server.py stdio``, or
``... http PORT TOKEN`` (streamable HTTP that refuses requests without ``Bearer TOKEN``)."""

import sys

try:
    from mcp.server.mcpserver import Context, MCPServer
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context
    from mcp.server.fastmcp import FastMCP as MCPServer
from mcp import types

server = MCPServer("gem-tools-options-test")


@server.tool()
async def chatty(text: str, ctx: Context) -> str:
    """Log a message and report progress, then echo."""
    await ctx.info(f"working on {text}")
    await ctx.report_progress(1, 2, "halfway")
    return text


@server.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Ask the client's model (an MCP sampling request)."""
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))
    reply = await ctx.session.create_message(messages=[message], max_tokens=16)
    return f"the model said: {reply.content.text}"


@server.tool()
def nothing() -> list:
    """Return no content."""
    return []


@server.tool()
def two_lines() -> list[str]:
    """Return two text blocks."""
    return ["first", "second"]


def _require_token(app, token: str):
    async def guarded(scope, receive, send):
        if scope["type"] == "http" and (b"authorization", f"Bearer {token}".encode()) not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        import uvicorn

        app = _require_token(server.streamable_http_app(), sys.argv[3])
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", lifespan="on")
