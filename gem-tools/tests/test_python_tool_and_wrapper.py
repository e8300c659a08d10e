"""The tool protocol, the Python tool, and the tool wrapper with GEM's presets."""

from __future__ import annotations

import asyncio
import json
import re
import threading

import pytest
from helpers import SumEnv

from gem.runner import run_episodes
from gem.wrappers import get_wrapper_fns
from gem_tools.base import Tool, ToolCall, ToolResult
from gem_tools.parsing import find_fenced_python, find_json_call, find_tag
from gem_tools.python_tool import PythonCodeTool
from gem_tools.sandbox import Limits, Sandbox
from gem_tools.wrapper import MAX_USES_NOTE, ToolEnvWrapper


@pytest.fixture(scope="module")
def python_tool() -> PythonCodeTool:
    return PythonCodeTool(timeout=3)


# -- parsing ------------------------------------------------------------------------------
def test_parsers_find_the_first_call_and_its_end():
    action = "think <python>print(1)</python> then <python>print(2)</python>"
    m = find_tag(action, "python")
    assert m.content == "print(1)" and action[: m.end].endswith("</python>") and "print(2)" not in action[: m.end]
    fenced = find_fenced_python("text\n```python\nx = 1\nprint(x)\n```\nmore")
    assert fenced.content == "x = 1\nprint(x)\n"
    assert find_tag("no tags here", "search") is None and find_fenced_python("```js\n1\n```") is None


def test_json_tool_calls_in_hermes_and_qwen_forms():
    hermes = '<tool_call>\n{"name": "python", "arguments": {"code": "print(3)"}}\n</tool_call>'
    assert find_json_call(hermes).arguments == {"code": "print(3)"}
    stringified = '<tool_call>{"name": "search", "arguments": "{\\"query\\": \\"moon\\"}"}</tool_call>'
    assert find_json_call(stringified).arguments == {"query": "moon"}
    xml = '<tool_call><tool_name>add</tool_name><arguments>{"a": 1}</arguments></tool_call>'
    assert (find_json_call(xml).name, find_json_call(xml).arguments) == ("add", {"a": 1})
    assert find_json_call("<tool_call>{not json}</tool_call>") is None
    assert find_json_call(hermes, names={"search"}) is None


def test_python_tool_parses_all_formats(python_tool):
    assert python_tool.parse("<python>print(1)</python>").arguments["code"] == "print(1)"
    assert python_tool.parse("```python\nprint(2)\n```").arguments["code"] == "print(2)"
    call = python_tool.parse(python_tool.json_call_example(code="print(3)") + " trailing")
    assert call.arguments["code"] == "print(3)" and call.parsed_action.endswith("</tool_call>")
    # the call that closes first wins, as in GEM
    both = "```python\nprint('a')\n``` and <python>print('b')</python>"
    assert python_tool.parse(both).arguments["code"] == "print('a')"
    assert python_tool.parse("\\boxed{3}") is None


def test_python_tool_schema_and_instruction(python_tool):
    (schema,) = python_tool.schemas()
    assert schema["function"]["name"] == "python"
    assert schema["function"]["parameters"]["required"] == ["code"]
    json.dumps(schema)
    assert "<python>" in python_tool.instruction_string()


def track_async_in_flight(monkeypatch) -> list[int]:
    """Record, at each sandbox run's start (sync or async, any :class:`Sandbox`), how many
    runs are in flight."""
    lock, active, seen = threading.Lock(), [0], []
    original, async_original = Sandbox.run_python, Sandbox.arun_python

    def run_python(*args, **kwargs):
        with lock:
            active[0] += 1
            seen.append(active[0])
        try:
            return original(*args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    async def arun_python(*args, **kwargs):  # native async: it does not go through run_python
        with lock:
            active[0] += 1
            seen.append(active[0])
        try:
            return await async_original(*args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(Sandbox, "run_python", run_python)
    monkeypatch.setattr(Sandbox, "arun_python", arun_python)
    return seen


# -- execution ----------------------------------------------------------------------------
def test_python_tool_success(python_tool):
    result = python_tool.execute_action("Let me compute. <python>print(123 * 456)</python> ok")
    assert isinstance(result, ToolResult) and result.parsed and not result.has_error and result.success
    assert result.observation == "Code execution result: 56088\n\n"
    assert result.parsed_action == "Let me compute. <python>print(123 * 456)</python>"


def test_python_tool_error_full_and_last_line(python_tool):
    code = "<python>print('before')\n1/0</python>"
    full = python_tool.execute_action(code)
    assert full.parsed and full.has_error
    assert full.observation.startswith("Code execution result: before\n\nTraceback")
    assert full.observation.rstrip().endswith("ZeroDivisionError: division by zero")
    last = PythonCodeTool(timeout=3, keep_error_last_line=True, sandbox=python_tool.sandbox).execute_action(code)
    assert last.observation == "Code execution result: before\n\nZeroDivisionError: division by zero\n"


def test_python_tool_timeout_and_hostile_code_are_errors(python_tool):
    slow = PythonCodeTool(timeout=1, limits=Limits(memory=256 << 20))
    assert slow.sandbox.limits.timeout == 1 and slow.sandbox.limits.memory == 256 << 20
    result = slow.execute_action("<python>import time\ntime.sleep(10)</python>")
    assert result.has_error and "timed out" in result.observation
    hostile = "<python>__import__('o'+'s').system('cat /root/.bashrc')\nprint('ran')</python>"
    bypass = python_tool.execute_action(hostile)
    assert bypass.parsed and "ran" in bypass.observation


def test_python_tool_unparsed_action(python_tool):
    assert python_tool.execute_action("just text") == (False, True, "", "")


@pytest.mark.asyncio
async def test_python_tool_async_calls_overlap(python_tool, monkeypatch):
    in_flight = track_async_in_flight(monkeypatch)
    sleepy = "<python>import time\ntime.sleep(0.5)\nprint('z')</python>"
    threads = threading.active_count()
    calls = [asyncio.ensure_future(python_tool.aexecute_action(sleepy)) for _ in range(8)]
    await asyncio.sleep(0.2)
    threads_while_running = threading.active_count()
    results = await asyncio.gather(*calls)
    assert all(r.success and "z" in r.observation for r in results)
    assert max(in_flight) == 8  # the runs were in the sandbox at the same time
    assert threads_while_running == threads  # awaited on the loop: no thread per call


# -- the wrapper --------------------------------------------------------------------------
def test_wrapper_gem_semantics(python_tool):
    env = ToolEnvWrapper(SumEnv(), [python_tool], tool_reward=0.05, tool_success_reward=0.25, max_tool_uses=2)
    obs, info = env.reset(seed=1)
    assert obs.startswith("What is") and python_tool.instruction_string() in obs
    assert info["tool_use_counter"] == 0 and info["use_tool"] is False
    a, b = env.unwrapped.a, env.unwrapped.b

    obs, reward, terminated, truncated, info = env.step(f"<python>print({a} + {b})</python>")
    assert obs == f"Code execution result: {a + b}\n\n" and reward == 0.0
    assert info["tool_reward_pending"] == pytest.approx(0.3)  # paid with a correct answer
    assert not terminated and not truncated and env.unwrapped.steps == 0  # the env was not stepped
    assert info["use_tool"] and info["tool_type"] == "python_code" and info["tool_success"]
    assert info["tool_use_counter"] == 1 and info["tool_success_counter"] == 1 and info["tool_time"] > 0

    obs, reward, terminated, _, info = env.step("<python>raise ValueError('bad')</python>")
    assert reward == 0.0 and info["tool_reward_pending"] == pytest.approx(0.3)  # a failed call earns nothing
    assert not terminated and obs.endswith(MAX_USES_NOTE)
    assert info["tool_use_counter"] == 2 and info["tool_success_counter"] == 1

    # max_tool_uses reached: even a tool call now goes to the env
    obs, reward, terminated, _, info = env.step(f"<python>print(1)</python> \\boxed{{{a + b}}}")
    assert terminated and reward == pytest.approx(1.3) and info["correct"] and info["use_tool"] is False
    assert info["tool_reward_credited"] == pytest.approx(0.3) and info["tool_reward_pending"] == 0.0
    assert env.unwrapped.steps == 1

    _, info = env.reset(seed=2)
    assert info["prev_ep_tool_use_counter"] == 2 and info["prev_ep_tool_success_counter"] == 1


def test_wrapper_error_reward_and_validation(python_tool):
    env = ToolEnvWrapper(SumEnv(), [python_tool], tool_execute_error_reward=-0.5)
    env.reset(seed=0)
    assert env.step("<python>1/0</python>")[1] == -0.5
    assert env.step("<python>print(1)</python>")[1] == 0.0
    with pytest.raises(ValueError):
        ToolEnvWrapper(SumEnv(), [python_tool], tool_reward=0.1, tool_execute_error_reward=-0.5)
    with pytest.raises(ValueError):
        ToolEnvWrapper(SumEnv(), [python_tool], tool_execute_error_reward=0.5)


class EchoTool(Tool):
    """Answers ``<echo>x</echo>``; fails on ``<echo>fail</echo>``."""

    name, tool_type = "echo", "echo"

    def parse(self, action: str) -> ToolCall | None:
        m = find_tag(action, "echo")
        return None if m is None else ToolCall(self.name, {"text": m.content}, action[: m.end])

    def execute(self, call: ToolCall) -> ToolResult:
        text = call.arguments["text"]
        return ToolResult(True, text == "fail", f"echo: {text}", call.parsed_action)

    def instruction_string(self) -> str:
        return "Use <echo>text</echo>."


def test_wrapper_tries_the_next_tool_when_one_fails(python_tool):
    env = ToolEnvWrapper(SumEnv(), [python_tool, EchoTool()], tool_success_reward=1.0, tool_reward_credit="immediate")
    obs, _ = env.reset(seed=0)
    assert "Available tools:" in obs and "<echo>" in obs
    obs, reward, *_, info = env.step("<python>1/0</python> <echo>hi</echo>")
    assert obs == "echo: hi" and reward == 1.0 and info["tool_type"] == "echo"
    obs, reward, *_, info = env.step("<echo>fail</echo>")
    assert obs == "echo: fail" and reward == 0.0 and not info["tool_success"]


def test_wrapper_state_round_trip_and_spawn(python_tool):
    env = ToolEnvWrapper(SumEnv(), [python_tool], max_tool_uses=3)
    env.reset(seed=5)
    env.step("<python>print(1)</python>")
    state = json.loads(json.dumps(env.get_state()))
    twin = env.spawn(same_state=True)
    assert twin.tool_use_counter == 1 and twin.unwrapped.a == env.unwrapped.a
    env.step("<python>print(2)</python>")
    env.set_state(state)
    assert env.tool_use_counter == 1


@pytest.mark.asyncio
async def test_wrapper_async_path_overlaps_tool_calls(python_tool, monkeypatch):
    envs = [ToolEnvWrapper(SumEnv(), [python_tool]) for _ in range(4)]
    for i, env in enumerate(envs):
        await env.areset(seed=i)
    in_flight = track_async_in_flight(monkeypatch)
    results = await asyncio.gather(*[e.astep("<python>import time\ntime.sleep(0.5)\nprint(7)</python>") for e in envs])
    assert all(r[0] == "Code execution result: 7\n\n" and r[4]["use_tool"] for r in results)
    assert max(in_flight) >= 2
    obs, reward, terminated, _, info = await envs[0].astep("\\boxed{0}")
    assert terminated and info["use_tool"] is False


# -- registration through the plugin hooks ------------------------------------------------
PRESETS = {
    "python_tool": (0.05, 0.25, False),
    "python_tool_no_int_reward": (0.0, 0.0, False),
    "python_tool_no_int_reward_last_line_error": (0.0, 0.0, True),
}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_gem_wrapper_names_resolve(name):
    (fn,) = get_wrapper_fns(name)
    env = fn(SumEnv())
    assert isinstance(env, ToolEnvWrapper)
    tool_reward, success_reward, last_line = PRESETS[name]
    assert (env.tool_reward, env.tool_success_reward, env.max_tool_uses) == (tool_reward, success_reward, 5)
    assert env.tools[0].keep_error_last_line is last_line and env.tools[0].timeout == 5
    obs, _ = env.reset(seed=3)
    obs, reward, *_, info = env.step("<python>print(40 + 2)</python>")
    assert obs == "Code execution result: 42\n\n" and reward == 0.0
    assert info["tool_reward_pending"] == pytest.approx(tool_reward + success_reward)


def test_tools_and_search_wrappers_are_registered():
    from gem.plugins import catalog

    cat = catalog()
    assert {"python", "search", "mcp"} <= set(cat.tools.names())
    assert {"search_tool", "search_tool_no_int_reward"} <= set(cat.wrappers.names())
    tool = cat.tools.get("python").factory(timeout=2)
    assert tool.execute_action("<python>print('hi')</python>").success


def test_get_wrapper_fns_chains_with_core_wrappers():
    env = SumEnv()
    for fn in get_wrapper_fns("python_tool,concat_with_action"):
        env = fn(env)
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step("<python>print('chained')</python>")
    assert "chained" in obs


# -- robustness ---------------------------------------------------------------------------
ADVERSARIAL_CALLS = [
    "<python>\ud800print('surrogate')</python>",
    "<python>\x00</python>",
    "<python></python>",
    "```python```",
    "<python>" * 50_000,  # many openings, no closing: must stay linear
    "<tool_call>" * 50_000 + "</tool_call>",
    '<tool_call>{"name": "python", "arguments": {"code": 5}}</tool_call>',
    '<tool_call>{"name": "python", "arguments": "not json"}</tool_call>',
    "<python>print('x' * 10**7)</python>",
]


@pytest.mark.parametrize("action", ADVERSARIAL_CALLS, ids=range(len(ADVERSARIAL_CALLS)))
def test_adversarial_tool_calls_never_raise(python_tool, action):
    env = ToolEnvWrapper(SumEnv(), [python_tool])
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert isinstance(obs, str) and isinstance(reward, float | int)
    if info["use_tool"]:
        assert obs.startswith("Code execution result: ")


def test_wrapped_env_passes_check_env(python_tool):
    from gem.testing import check_env

    env = ToolEnvWrapper(SumEnv(), [python_tool], tool_reward=0.1)
    check_env(env, num_random_strings=50)
    (fn,) = get_wrapper_fns("python_tool_no_int_reward_last_line_error")
    check_env(fn(SumEnv()), num_random_strings=20)


@pytest.mark.asyncio
async def test_tool_calls_overlap_in_the_async_runner(monkeypatch):
    seen = track_async_in_flight(monkeypatch)

    async def policy(observation: str) -> str:
        question = re.match(r"What is (\d+) \+ (\d+)\?", observation)
        if question:
            return f"<python>import time\ntime.sleep(0.3)\nprint({question[1]} + {question[2]})</python>"
        return f"\\boxed{{{observation.split(': ')[1].strip()}}}"

    trajectories = await run_episodes(SumEnv, policy, seeds=range(4), wrappers="python_tool", concurrency=4)
    assert [len(t) for t in trajectories] == [2, 2, 2, 2]
    assert all(t.total_return == pytest.approx(0.05 + 0.25 + 1.0) for t in trajectories)
    assert all(t.turns[0].info["use_tool"] and t.turns[1].info["correct"] for t in trajectories)
    assert max(seen) >= 2


def test_python_tool_sees_no_site_packages_only_allowed_ones():
    # issue 16: with a dataset wheel pip-installed in the venv, tool code read GSM8K's
    # answers from site-packages; now it sees the stdlib and the packages it is allowed
    import importlib.util

    secret = importlib.util.find_spec("msgspec").origin  # a file in this venv's site-packages
    code = (
        f"<python>\ntry:\n    open({secret!r}).read(1); print('READ')\nexcept OSError:\n    print('hidden')\n"
        "try:\n    import msgspec; print('IMPORTED')\nexcept ImportError:\n    print('no msgspec')\n</python>"
    )
    observation = PythonCodeTool(timeout=5).execute_action(code).observation
    assert observation == "Code execution result: hidden\nno msgspec\n\n"
    allowed = PythonCodeTool(timeout=5, packages=("msgspec",))
    allowed = allowed.execute_action("<python>import msgspec; print(1)</python>")
    assert allowed.observation == "Code execution result: 1\n\n"
