"""The MCP tool's reference-package options (``config=``, ``auth``/``headers``, the log,
progress and sampling handlers, retries) and its observation text, which is the
reference's: the server's text as is, ``[Tool execution error: ...]`` for a call the
server failed, ``Tool execution completed with no output`` for an empty result."""

from __future__ import annotations

import inspect
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gem_tools.mcp_tool import MCPTool

SERVER = str(Path(__file__).with_name("mcp_options_server.py"))
BASIC_SERVER = str(Path(__file__).with_name("mcp_server.py"))
SERVER_ERROR = r"\[Tool execution error: Error executing tool fail(: nope)?\]"
STDIO = {"command": sys.executable, "args": [SERVER, "stdio"]}


def call(name: str, **arguments) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def test_every_reference_constructor_argument_is_accepted():
    reference = [
        "config", "auth", "headers", "log_handler", "progress_handler", "sampling_handler",
        "max_retries", "delay_between_retries", "execution_timeout", "validate_on_init", "num_workers",
    ]  # fmt: skip
    signature = inspect.signature(MCPTool)
    for name in reference:
        signature.bind_partial(**{name: None})


def test_observations_are_the_servers_text_as_the_reference_shows_it():
    basic = {"command": sys.executable, "args": [BASIC_SERVER, "stdio"]}
    with MCPTool(config={"mcpServers": {"basic": basic}}) as tool:
        assert tool.execute_action(call("add", a=2, b=40)) == (True, False, "42", call("add", a=2, b=40))
        failed = tool.execute_action(call("fail", reason="nope"))
        # the server's error text (mcp 2 leaves the exception's message out), in the reference's brackets
        assert failed.has_error and re.fullmatch(SERVER_ERROR, failed.observation)
    with MCPTool(STDIO) as tool:  # one server's entry as the config, as the reference reads it
        assert tool.execute_action(call("nothing")).observation == "Tool execution completed with no output"
        assert tool.execute_action(call("two_lines")).observation == "first\nsecond"
        assert "<mcp_result>" not in tool.instruction_string()


def test_log_progress_and_sampling_handlers():
    logs, progress, asked = [], [], []

    def sample(messages, params, context):
        asked.append((messages[0].content.text, params.maxTokens if hasattr(params, "maxTokens") else None))
        return "forty-two"

    with MCPTool(config=STDIO, log_handler=logs.append, progress_handler=lambda *a: progress.append(a),
                 sampling_handler=sample, execution_timeout=20) as tool:  # fmt: skip
        assert tool.timeout == 20
        assert tool.execute_action(call("chatty", text="hello")).observation == "hello"
        assert tool.execute_action(call("ask_model", question="6 x 7?")).observation == "the model said: forty-two"
    assert [entry.data for entry in logs] == ["working on hello"]
    assert progress == [(1.0, 2.0, "halfway")]
    assert asked[0][0] == "6 x 7?"


@pytest.mark.asyncio
async def test_async_handlers_are_awaited():
    seen = []

    async def log(params):
        seen.append(params.data)

    async def sample(messages, params, context):
        return "async answer"

    with MCPTool(command=[sys.executable, SERVER, "stdio"], log_handler=log, sampling_handler=sample) as tool:
        result = await tool.aexecute_action(call("ask_model", question="q"))
        assert result.observation == "the model said: async answer"
        await tool.aexecute_action(call("chatty", text="t"))
    assert seen == ["working on t"]


@pytest.fixture(scope="module")
def token_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port), "s3cret"], stderr=subprocess.DEVNULL)
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


def test_auth_and_headers_reach_the_server(token_url):
    with MCPTool(token_url, auth="s3cret") as tool:
        assert tool.execute_action(call("chatty", text="in")).observation == "in"
    with MCPTool.from_url(token_url, headers={"Authorization": "Bearer s3cret"}) as tool:
        assert "chatty" in tool.server_tools
    entry = {"transport": "http", "url": token_url, "headers": {"Authorization": "Bearer s3cret"}}
    with MCPTool({"mcpServers": {"main": entry}}) as tool:
        assert "chatty" in tool.server_tools
    with pytest.raises(Exception):  # noqa: B017 - refused by the server: the SDK's error type varies
        MCPTool(token_url, auth="wrong", max_retries=1, connect_timeout=10)


def test_connect_retries_then_reports(tmp_path, monkeypatch):
    from gem_tools import mcp_tool

    slept: list[float] = []
    monkeypatch.setattr(mcp_tool.time, "sleep", slept.append)
    with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a dead server varies
        MCPTool(command=[sys.executable, str(tmp_path / "missing.py")], max_retries=3, delay_between_retries=0.5,
                connect_timeout=10)  # fmt: skip
    assert slept == [0.5, 0.5]  # three attempts


def test_reference_classmethods(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"opts": STDIO}}))
    with MCPTool.from_config_file(str(config)) as tool:
        assert "two_lines" in tool.server_tools
    with MCPTool.from_local_command(STDIO, name="local") as tool:
        assert "nothing" in tool.server_tools
    with pytest.raises(ValueError, match="not both"):
        MCPTool("http://127.0.0.1:1/mcp", config="http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match="go with a URL"):
        MCPTool({"mcpServers": {"a": STDIO}}, auth="token")
