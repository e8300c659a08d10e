"""Reference-package scripts on gem-tools: its module paths, the Python tool wrapper, and
MCP against the time server it ships (ours: gem_tools.mcp_servers.time_server), all
written the way a reference user writes them."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from functools import partial

import pytest

import gem
from gem.testing.envs import CountEnv
from gem.tools.mcp_tool import MCPTool
from gem.tools.python_code_tool import PythonCodeTool
from gem.tools.tool_env_wrapper import ToolEnvWrapper
from gem.utils.debug import run_and_print_episode
from gem.wrappers.wrapper_factory import WRAPPER_FACTORY

TIME_SERVER = [sys.executable, "-m", "gem.tools.mcp_server.time_mcp"]

# the reference's test actions for the time server (its <tool_name>/<arguments> call form)
TIME_ACTIONS = [
    '<tool_call><tool_name>current_time</tool_name><arguments>{"format": "YYYY-MM-DD", "timezone": "UTC"}'
    "</arguments></tool_call> ...",
    '<tool_call><tool_name>days_in_month</tool_name><arguments>{"date": "2024-02-01"}</arguments></tool_call>',
    '<tool_call><tool_name>convert_time</tool_name><arguments>{"sourceTimezone": "UTC", "targetTimezone": '
    '"Asia/Shanghai", "time": "2023-01-01 20:00:00"}</arguments></tool_call>',
    "Dummy action",
    '<tool_call><tool_name>non_existing_tool</tool_name><arguments>{"foo": "bar"}</arguments></tool_call> ...',
]


class ChatTemplate:
    """Stand-in for a Hugging Face tokenizer (none can be downloaded here): renders ChatML."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


@pytest.fixture
def count_env(gem_registry):
    gem_registry.register("test:Count-v0", CountEnv, high=10)
    return "test:Count-v0"


def test_python_tool_wrapper_the_getting_started_way(count_env):
    env = gem.make(count_env, max_turns=3)
    tool = PythonCodeTool()
    wrapped_env = ToolEnvWrapper(env, tools=[tool])
    wrapped_env = WRAPPER_FACTORY["concat_chat"](wrapped_env, tokenizer=ChatTemplate())
    obs, info = wrapped_env.reset()
    dummy_action = (
        "<think>Let me compare 9.9 and 9.11 using python.</think><python>print('9.9 > 9.11?', 9.9 > 9.11)</python>"
    )
    obs, reward, terminated, truncated, info = wrapped_env.step(dummy_action)
    assert "9.9 > 9.11? True" in obs and obs.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>tool\nCode execution result" in obs  # tool output in the tool role, as there
    assert not terminated and info["tool_use_counter"] == 1
    wrapped_env.close()


def test_the_reference_tool_tests_single_action_loop(count_env):
    env = ToolEnvWrapper(gem.make(count_env, max_turns=3), tools=[PythonCodeTool(timeout=2, keep_error_last_line=True)])
    env.reset()
    actions = ["<python>print('Hello from Python!')</python> ...", "Dummy action", "<python>prnit('x')</python>"]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert "NameError" in obs or terminated


def test_tool_and_chat_wrappers_in_a_vector_env(count_env, capsys):
    tool = PythonCodeTool(timeout=2)
    tool_env_wrapper = partial(ToolEnvWrapper, tools=[tool], max_tool_uses=3)
    chat_wrapper = partial(WRAPPER_FACTORY["concat_chat"], tokenizer=ChatTemplate())
    for async_mode in (False, True):
        vec = gem.make_vec([count_env] * 2, wrappers=[tool_env_wrapper, chat_wrapper], async_mode=async_mode,
                           max_turns=3)
        run_and_print_episode(vec, policy=lambda _: ["<python>print(6 * 7)</python>"] * 2, ignore_done=True,
                              max_steps=2)
        vec.close()
    assert capsys.readouterr().out.count("Code execution result: 42") >= 4


def test_wrappers_by_name_include_the_tool_presets(gem_plugins_catalog):
    from gem.wrappers.wrapper_factory import get_wrapper_fns

    gem_plugins_catalog.envs.register("test:Count-v0", CountEnv, high=10)
    env = gem.make("test:Count-v0", max_turns=3)
    for fn in get_wrapper_fns("python_tool,concat_with_action,episode_tracking"):
        env = fn(env)
    obs, info = env.reset(seed=0)
    obs, reward, *_, info = env.step("<python>print(2 + 3)</python>")
    assert "Code execution result: 5" in obs and info["step_counter"] == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def time_mcp_url():
    """The time server started as the reference's docs start it (``python -m gem.tools.mcp_server.time_mcp``)."""
    port = _free_port()
    proc = subprocess.Popen(
        [*TIME_SERVER, "--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port),
         "--path", "/time-mcp"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "the time MCP server did not start"
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/time-mcp"
    proc.terminate()
    proc.wait(timeout=10)


def _play_time_actions(tool: MCPTool, env_id: str) -> list[tuple[str, dict]]:
    env = ToolEnvWrapper(gem.make(env_id, max_turns=10), tools=[tool], max_tool_uses=10)
    env.reset()
    steps = []
    for action in TIME_ACTIONS:
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((obs, info))
        if terminated or truncated:
            break
    return steps


def test_mcp_tool_from_url_against_the_time_server(time_mcp_url, count_env):
    tool = MCPTool.from_url(time_mcp_url, validate_on_init=False)
    try:
        assert {"current_time", "days_in_month", "convert_time", "get_week_year"} <= set(tool.server_tools)
        steps = _play_time_actions(tool, count_env)
    finally:
        tool.close()
    assert time.strftime("%Y-", time.gmtime()) in steps[0][0]
    assert "29" in steps[1][0]
    assert "2023-01-02 04:00:00" in steps[2][0]


def test_mcp_tool_from_a_reference_config_over_stdio(count_env):
    config = {"mcpServers": {"time": {"command": sys.executable, "args": [*TIME_SERVER[1:], "--transport", "stdio"]}}}
    with MCPTool(config, validate_on_init=False) as tool:
        steps = _play_time_actions(tool, count_env)
    assert "29" in steps[1][0]


@pytest.mark.anyio(backends=["asyncio"])
async def test_the_time_server_in_process_as_the_reference_tests_call_it():
    from gem.tools.mcp_server.time_mcp import _moment_to_strftime, _parse_dt, app

    assert _moment_to_strftime("h:mm A") == "%-I:%M %p" and _moment_to_strftime("MM/DD/YY") == "%m/%d/%y"
    assert _parse_dt("2023-01-01 12:30:45.123").microsecond == 123000
    week = await app.get_tool("get_week_year")
    assert (await week.run({"date": "2023-01-01"})).content[0].text == "week: 0, isoWeek: 52"
    stamp = await app.get_tool("get_timestamp")
    assert int((await stamp.run({"time": "2023-01-01 12:30:45.456"})).content[0].text) % 1000 == 456
    relative = await app.get_tool("relative_time")
    soon = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() + 2 * 3600 + 90))
    assert (await relative.run({"time": soon})).content[0].text == "in 2 hours"
    with pytest.raises(KeyError):
        await app.get_tool("nope")


def test_a_tool_written_against_the_reference_base_tool(count_env):
    from gem.tools.base_tool import BaseTool

    class Upper(BaseTool):
        tool_type = "upper"

        def instruction_string(self):
            return "Write <upper>text</upper> to shout it."

        def execute_action(self, action):
            if "<upper>" not in action or "</upper>" not in action:
                return False, True, "", ""
            text = action.split("<upper>", 1)[1].split("</upper>", 1)[0]
            return True, False, text.upper(), action[: action.index("</upper>") + len("</upper>")]

    # the reference's crediting (the tool reward paid at once; ours defaults to "on_correct")
    env = ToolEnvWrapper(gem.make(count_env, max_turns=3), tools=[Upper()], tool_reward=0.1,
                         tool_reward_credit="immediate")
    obs, _ = env.reset()
    assert "Write <upper>text</upper>" in obs
    obs, reward, terminated, _, info = env.step("<upper>hello</upper> then more")
    assert (obs, reward, terminated, info["tool_type"]) == ("HELLO", 0.1, False, "upper")
    assert info["parsed_action"] == "<upper>hello</upper>"
    *_, info = env.step("\\boxed{5}")  # not a tool call: the env gets it
    assert info["use_tool"] is False
