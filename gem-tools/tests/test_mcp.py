"""The MCP tool against a real MCP server (tests/mcp_server.py), over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import SumEnv

from gem_tools.mcp_tool import MCPTool
from gem_tools.wrapper import ToolEnvWrapper

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def call(name: str, **arguments) -> str:
    import json

    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


@pytest.fixture(scope="module")
def stdio_tool():
    tool = MCPTool(command=[sys.executable, SERVER, "stdio"])
    yield tool
    tool.close()


@pytest.fixture(scope="module")
def http_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "the MCP HTTP server did not start"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


def test_stdio_lists_the_server_tools_with_schemas(stdio_tool):
    assert set(stdio_tool.server_tools) == {"add", "shout", "fail"}
    schemas = {s["function"]["name"]: s["function"] for s in stdio_tool.schemas()}
    assert schemas["add"]["parameters"]["required"] == ["a", "b"]
    assert schemas["add"]["description"] == "Add two integers."
    assert '"name": "shout"' in stdio_tool.instruction_string()


def test_stdio_calls(stdio_tool):
    ok = stdio_tool.execute_action("Let me add. " + call("add", a=2, b=40) + " then answer")
    assert ok.success and ok.observation == "42"  # the server's text as is, as the reference shows it
    assert ok.parsed_action.endswith("</tool_call>")
    failed = stdio_tool.execute_action(call("fail", reason="nope"))
    assert failed.parsed and failed.has_error
    assert failed.observation.startswith("[Tool execution error: Error executing tool fail")
    bad_args = stdio_tool.execute_action(call("add", a="x"))
    assert bad_args.parsed and bad_args.has_error
    # the reference's XML call form parses too
    xml = '<tool_call><tool_name>shout</tool_name><arguments>{"text": "hey"}</arguments></tool_call>'
    assert "HEY" in stdio_tool.execute_action(xml).observation


def test_calls_to_unknown_tools_are_not_parsed(stdio_tool):
    assert not stdio_tool.execute_action(call("delete_everything")).parsed
    assert not stdio_tool.execute_action("plain answer").parsed


@pytest.mark.asyncio
async def test_async_calls_share_the_session(stdio_tool):
    results = await asyncio.gather(*[stdio_tool.aexecute_action(call("shout", text=f"x{i}")) for i in range(5)])
    assert [r.observation for r in results] == [f"X{i}" for i in range(5)]


def test_tool_names_subset_and_bad_config():
    with MCPTool(command=[sys.executable, SERVER, "stdio"], tool_names=["shout"]) as tool:
        assert set(tool.server_tools) == {"shout"}
        assert not tool.execute_action(call("add", a=1, b=2)).parsed
    with pytest.raises(ValueError, match="exactly one"):
        MCPTool()


def test_streamable_http(http_url):
    with MCPTool(url=http_url) as tool:
        assert set(tool.server_tools) == {"add", "shout", "fail"}
        assert tool.execute_action(call("add", a=20, b=22)).observation == "42"
        assert tool.execute_action(call("fail", reason="r")).has_error


def test_mcp_tool_in_the_wrapper(stdio_tool):
    env = ToolEnvWrapper(SumEnv(), [stdio_tool], tool_reward=0.1)
    obs, _ = env.reset(seed=0)
    assert "<tool_call>" in obs
    a, b = env.unwrapped.a, env.unwrapped.b
    obs, reward, terminated, _, info = env.step(call("add", a=a, b=b))
    assert str(a + b) in obs and reward == 0.0 and not terminated and info["tool_type"] == "mcp"
    assert info["tool_reward_pending"] == pytest.approx(0.1)  # paid with a correct answer
    _, reward, terminated, *_ = env.step(f"\\boxed{{{a + b}}}")
    assert terminated and reward == pytest.approx(1.1)


def test_config_with_two_servers_prefixes_tool_names(tmp_path):
    import json

    server = {"command": sys.executable, "args": [SERVER, "stdio"]}
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"left": server, "right": server}}))
    with MCPTool.from_config(str(config), tool_names=["left_add", "right_shout"]) as tool:
        assert set(tool.server_tools) == {"left_add", "right_shout"}
        assert [s["function"]["name"] for s in tool.schemas()] == ["left_add", "right_shout"]
        assert tool.execute_action(call("left_add", a=1, b=2)).observation == "3"
        assert "HI" in tool.execute_action(call("right_shout", text="hi")).observation
        assert not tool.execute_action(call("add", a=1, b=2)).parsed
    with pytest.raises(ValueError, match="need"):
        MCPTool.from_config({"mcpServers": {"bad": {"transport": "sse"}}})
