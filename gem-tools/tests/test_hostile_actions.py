"""Red-team findings on tool calls: parsing is bounded (no RecursionError, no quadratic
scan) and junk or failed calls never out-score a correct answer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import SumEnv

from gem.testing import scripted_return
from gem.wrappers import get_wrapper_fns
from gem_tools.parsing import MAX_CALL_BYTES, MAX_CALLS, MAX_JSON_DEPTH, find_json_call
from gem_tools.python_tool import PythonCodeTool
from gem_tools.search import BM25Index, SearchTool
from gem_tools.wrapper import ToolEnvWrapper

DEEP_JSON = "<tool_call>" + "[" * 1000 + "</tool_call>"
# the reference's XML call form, opened over and over and closed once: a lazy regex over
# it backtracks quadratically (17 s per step at 220 KB)
XML_REPEATED = "<tool_call>" + "<tool_name>python</tool_name><arguments>{" * 4000 + "</tool_call>"


@pytest.fixture(scope="module")
def tools() -> list:
    index = BM25Index([{"title": "Paris", "text": "Paris is the capital of France."}])
    return [PythonCodeTool(timeout=3), SearchTool(index=index)]


@pytest.mark.parametrize("action", [DEEP_JSON, '<tool_call>{"name": "python", "arguments": ' * 600 + "</tool_call>"])
def test_deeply_nested_json_is_not_a_call_and_never_raises(tools, action):
    assert find_json_call(action) is None
    for tool in tools:
        env = ToolEnvWrapper(SumEnv(), [tool])
        env.reset(seed=0)
        obs, reward, terminated, _, info = env.step(action)
        # not a tool call: the env grades it (a format error here)
        assert (obs, reward, terminated, info["use_tool"]) == ("format error", -0.1, True, False)
        assert info["format_error"] is True


def test_a_tool_call_is_no_format_error(tools):
    env = ToolEnvWrapper(SumEnv(), tools)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("<python>print(6 * 7)</python>")
    assert (info["use_tool"], info["format_error"], terminated) == (True, False, False), obs
    assert env.step("no answer")[4]["format_error"] is True


def test_the_caps_are_limits_not_a_change_of_format():
    call = {"name": "python", "arguments": {"code": "x = " + "[" * (MAX_JSON_DEPTH - 2) + "]" * (MAX_JSON_DEPTH - 2)}}
    nested = json.dumps(call)
    assert find_json_call(f"<tool_call>{nested}</tool_call>").arguments == call["arguments"]  # brackets in strings
    deep = {"name": "python", "arguments": {"code": "1", "x": json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)}}
    assert find_json_call(f"<tool_call>{json.dumps(deep)}</tool_call>") is None
    big = json.dumps({"name": "python", "arguments": {"code": "#" * MAX_CALL_BYTES}})
    assert find_json_call(f"<tool_call>{big}</tool_call>") is None
    good = '<tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'
    assert find_json_call("<tool_call>junk</tool_call>" * (MAX_CALLS - 1) + good) is not None
    assert find_json_call("<tool_call>junk</tool_call>" * MAX_CALLS + good) is None
    xml = '<tool_call> <tool_name>add</tool_name>\n<arguments>{"a": "</arguments>"}</arguments> </tool_call>'
    assert (find_json_call(xml).name, find_json_call(xml).arguments) == ("add", {"a": "</arguments>"})


def test_the_repeated_xml_form_parses_in_linear_time():
    # a hang guard, not a speed test: the old lazy regex took minutes on this payload
    script = (
        "import sys; from gem_tools.parsing import find_json_call; "
        "from gem_tools.search import BM25Index, SearchTool; "
        "action = sys.stdin.read(); "
        "assert find_json_call(action) is None; "
        "assert SearchTool(index=BM25Index([{'contents': 'Paris France'}])).parse(action) is None"
    )
    payload = XML_REPEATED * 2  # 440 KB
    done = subprocess.run([sys.executable, "-c", script], input=payload, text=True, timeout=60, capture_output=True)
    assert done.returncode == 0, done.stderr


def _episode(env, actions: list[str]) -> float:
    return scripted_return(env, actions, seed=0)


@pytest.mark.parametrize("preset", ["python_tool", "python_tool_no_int_reward"])
def test_junk_tool_calls_then_a_wrong_answer_never_beat_a_correct_answer(preset):
    (wrap,) = get_wrapper_fns(preset)
    env = wrap(SumEnv())
    env.reset(seed=0)
    right = env.unwrapped.a + env.unwrapped.b
    junk = ["<python>print('junk')</python>"] * 5
    farmed = _episode(env, [*junk, f"\\boxed{{{right + 1}}}"])
    failed = _episode(env, ["<python>1/0</python>"] * 5 + [f"\\boxed{{{right + 1}}}"])
    correct = _episode(env, [f"\\boxed{{{right}}}"])
    assert correct == 1.0 and farmed == 0.0 and failed == 0.0
    # tools used on the way to a correct answer still earn the preset's shaping
    assert _episode(env, [*junk[:1], f"\\boxed{{{right}}}"]) >= correct


def test_an_episode_cut_off_after_tool_calls_earns_nothing():
    class Cut(SumEnv):
        def step(self, action):
            return "time is up", 0.0, False, True, {}

    cut = ToolEnvWrapper(Cut(), [PythonCodeTool(timeout=3)], tool_reward=0.3)
    assert _episode(cut, ["<python>print(1)</python>"] * 3 + ["no answer"]) == 0.0


def test_the_reference_shaping_stays_available_by_name():
    env = ToolEnvWrapper(SumEnv(), [PythonCodeTool(timeout=3)], tool_reward=0.3, tool_reward_credit="immediate")
    env.reset(seed=0)
    assert env.step("<python>print(1)</python>")[1] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="tool_reward_credit"):
        ToolEnvWrapper(SumEnv(), [PythonCodeTool(timeout=3)], tool_reward_credit="later")


def test_math500_with_the_python_tool_cannot_be_farmed():
    gem_envs_math = pytest.importorskip("gem_envs_math")
    import gem

    (wrap,) = get_wrapper_fns("python_tool")
    env = wrap(gem.make("eval:MATH500"))
    env.reset(idx=0)
    reference = env.unwrapped.answer
    assert gem_envs_math is not None
    junk = ["<python>print(1)</python>"] * 5
    farmed = 0.0
    for action in [*junk, r"\boxed{12345}"]:
        farmed += env.step(action)[1]
    env.reset(idx=0)
    _, correct, *_ = env.step(rf"\boxed{{{reference}}}")
    assert correct == 1.0 and farmed == 0.0


def test_search_queries_are_capped(tools):
    from gem_tools.search.tool import MAX_QUERY_CHARS

    search = tools[1]
    call = search.parse("<search>" + "Paris capital France " * 20_000 + "</search>")
    assert len(call.arguments["query"]) == MAX_QUERY_CHARS
    assert search.execute(call).success
