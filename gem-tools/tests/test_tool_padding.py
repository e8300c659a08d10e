"""Tool shaping cannot be farmed by padding: an episode's credited tool reward is capped
(one call's worth by default), failed and repeated calls never pay, and a wrong answer
never beats a right one, whatever calls come before it."""

from __future__ import annotations

import asyncio
import itertools
import json
import random

import pytest
from helpers import SumEnv

from gem.testing import scripted_return
from gem.testing.envs import CountEnv
from gem.wrappers import get_wrapper_fns
from gem_tools import plugin
from gem_tools.base import Tool, ToolCall, ToolResult
from gem_tools.parsing import find_tag
from gem_tools.wrapper import ToolEnvWrapper

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st
except ImportError:  # gem-tools[test] does not list hypothesis; the exhaustive test covers short episodes
    given = None


def play(env, actions: list[str], seed: int = 0) -> float:
    return scripted_return(env, actions, seed=seed)


def guess(env) -> str:
    return f"\\boxed{{{env.unwrapped.target}}}"


def wrong_guess(env) -> str:
    return f"\\boxed{{{env.unwrapped.target % env.unwrapped.high + 1}}}"


# -- the attack, on a game with GEM's tool presets -----------------------------------------
def python_game():
    (wrap,) = get_wrapper_fns("python_tool")
    return wrap(CountEnv(high=10, max_turns=3))


def test_junk_python_calls_before_a_right_guess_pay_one_call_at_most():
    env = python_game()
    env.reset(seed=0)
    right, wrong = guess(env), wrong_guess(env)
    junk = [f"<python>print({i})</python>" for i in range(5)]
    alone = play(env, [right])
    padded = play(env, [*junk, right])
    assert alone == 1.0
    assert padded == pytest.approx(1.0 + 0.05 + 0.25)  # the reference pays 2.5 here
    assert play(env, [*junk[:1], right]) == pytest.approx(padded)  # the first call is all that pays
    assert play(env, [*junk, wrong, wrong, wrong]) == 0.0


def test_failed_and_repeated_python_calls_never_pay():
    env = python_game()
    env.reset(seed=0)
    right = guess(env)
    assert play(env, ["<python>1/0</python>"] * 5 + [right]) == 1.0
    (wrap,) = get_wrapper_fns("python_tool")
    roomy = wrap(CountEnv(high=10, max_turns=3), max_tool_reward_per_episode=10.0)
    same = ["<python>print(7)</python>", "<python>  print(7)\n</python>", "thinking <python>print(7)</python>"]
    assert play(roomy, [*same, right]) == pytest.approx(1.3)


def test_junk_searches_before_a_right_guess_pay_one_call_at_most(tmp_path, monkeypatch):
    pytest.importorskip("bm25s", reason="the search preset's local corpus needs gem-tools[search]")
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"title": f"Doc {i}", "text": f"page {i} about number {i}"} for i in range(10)]
    corpus.write_text("\n".join(json.dumps(row) for row in rows))
    monkeypatch.delenv("SEARCH_URL", raising=False)
    monkeypatch.setenv("GEM_SEARCH_CORPUS", str(corpus))
    plugin._shared_search_tool.cache_clear()
    try:
        (wrap,) = get_wrapper_fns("search_tool")
        env = wrap(CountEnv(high=10, max_turns=3))
        env.reset(seed=1)
        right = guess(env)
        junk = [f"<search>number {i}</search>" for i in range(5)]
        assert play(env, [right], seed=1) == 1.0
        assert play(env, [*junk, right], seed=1) == pytest.approx(1.3)  # the reference pays 2.5
        assert play(env, ["<search>number 1</search>"] * 5 + [right], seed=1) == pytest.approx(1.3)
    finally:
        plugin._shared_search_tool.cache_clear()


# -- the cap: a constructor argument, reachable through the presets --------------------------
def test_the_cap_is_a_wrapper_argument_and_a_preset_override():
    (wrap,) = get_wrapper_fns("python_tool")
    env = wrap(CountEnv(high=10, max_turns=3), max_tool_reward_per_episode=0.5)
    assert env.max_tool_reward_per_episode == 0.5 and env.tool_reward == 0.05  # the rest of the preset stays
    env.reset(seed=0)
    right = guess(env)
    calls = [f"<python>print({i})</python>" for i in range(4)]
    assert play(env, [*calls[:1], right]) == pytest.approx(1.3)
    assert play(env, [*calls, right]) == pytest.approx(1.5)
    assert wrap(SumEnv()).max_tool_reward_per_episode == pytest.approx(0.3)  # default: one call's worth


def test_the_cap_is_validated():
    tool = EchoTool()
    with pytest.raises(ValueError, match="max_tool_reward_per_episode must be a finite number >= 0"):
        ToolEnvWrapper(SumEnv(), [tool], tool_reward=0.1, max_tool_reward_per_episode=-1)
    with pytest.raises(ValueError, match="max_tool_reward_per_episode must be a finite number >= 0"):
        ToolEnvWrapper(SumEnv(), [tool], tool_reward=0.1, max_tool_reward_per_episode=float("inf"))
    with pytest.raises(ValueError, match="applies to tool_reward_credit='on_correct'"):
        ToolEnvWrapper(SumEnv(), [tool], tool_reward=0.1, tool_reward_credit="immediate", max_tool_reward_per_episode=1)


def test_the_reference_crediting_stays_available_and_farmable():
    env = ToolEnvWrapper(CountEnv(high=10, max_turns=3), [EchoTool()], tool_reward=0.3, tool_reward_credit="immediate")
    env.reset(seed=0)
    # what the reference pays: every call, failed or repeated, at once
    wrong = wrong_guess(env)
    assert play(env, ["<echo>x</echo>"] * 4 + ["<echo>fail</echo>", wrong, wrong, wrong]) == pytest.approx(1.5)


def test_seen_calls_survive_get_state_and_set_state():
    env = ToolEnvWrapper(CountEnv(high=10, max_turns=3), [EchoTool()], tool_reward=0.3, max_tool_reward_per_episode=1)
    env.reset(seed=0)
    env.step("<echo>a</echo>")
    state = json.loads(json.dumps(env.get_state()))
    twin = env.spawn()
    twin.reset(seed=0)
    twin.set_state(state)
    _, _, _, _, info = twin.step("<echo>a</echo>")
    assert info["tool_call_repeated"] and info["tool_reward_pending"] == pytest.approx(0.3)
    assert twin.step(guess(twin))[1] == pytest.approx(1.3)
    twin.reset(seed=0)
    assert not twin.step("<echo>a</echo>")[4]["tool_call_repeated"]  # a new episode starts afresh


def test_the_async_path_follows_the_same_rule():
    env = ToolEnvWrapper(CountEnv(high=10, max_turns=3), [EchoTool()], tool_reward=0.3)

    async def episode(actions: list[str]) -> float:
        await env.areset(seed=0)
        total = 0.0
        for action in actions:
            _, reward, terminated, truncated, _ = await env.astep(action)
            total += reward
            if terminated or truncated:
                break
        return total

    env.reset(seed=0)
    right = guess(env)
    calls = [f"<echo>{i}</echo>" for i in range(6)]
    assert asyncio.run(episode([*calls, right])) == pytest.approx(1.3)


# -- property: over any sequence of calls --------------------------------------------------
class EchoTool(Tool):
    """Answers ``<echo>x</echo>`` in-process; ``<echo>fail</echo>`` fails."""

    name, tool_type = "echo", "echo"

    def parse(self, action: str) -> ToolCall | None:
        m = find_tag(action, "echo")
        return None if m is None else ToolCall(self.name, {"text": m.content}, action[: m.end])

    def execute(self, call: ToolCall) -> ToolResult:
        text = call.arguments["text"]
        return ToolResult(True, text == "fail", f"echo: {text}", call.parsed_action)

    def instruction_string(self) -> str:
        return "Use <echo>text</echo>."


class PatientGame(CountEnv):
    """CountEnv where anything but a guess is an invalid move (0, the game goes on) and
    ``\\boxed{0}`` gives up (0, the episode ends), so every episode reaches its answer."""

    def step(self, action: str):
        if action == "\\boxed{0}":
            self.turn += 1
            return "Given up.", 0.0, True, False, {"correct": False}
        if "\\boxed{" not in action:
            self.turn += 1
            return "Invalid move.", 0.0, False, self.turn >= self.max_turns, {}
        return super().step(action)


#: wrapper settings: GEM's presets' constants, a roomier cap, a per-call cost, a penalty
SHAPINGS = [
    {"tool_reward": 0.05, "tool_success_reward": 0.25},
    {"tool_reward": 0.3},
    {"tool_reward": 0.0},
    {"tool_reward": 0.3, "max_tool_reward_per_episode": 0.7},
    {"tool_reward": -0.05, "tool_success_reward": 0.25},
    {"tool_execute_error_reward": -0.5},
]

#: what an agent may do before answering: a new call, a call that fails, a call made
#: before (respaced), a wrong guess the game answers with a hint
MOVES = ("new", "fail", "again", "guess")


def _actions(env, moves: tuple[str, ...]) -> list[str]:
    actions = []
    for i, move in enumerate(moves):
        if move == "new":
            actions.append(f"thinking {i} <echo>junk {i}</echo>")
        elif move == "fail":
            actions.append("<echo>fail</echo>")
        elif move == "again":
            actions.append("<echo>  junk   0 </echo>")
        else:
            actions.append(wrong_guess(env))
    return actions


def _check_padding_cannot_pay(shaping: dict, moves: tuple[str, ...], max_tool_uses: int | None = 10) -> None:
    env = ToolEnvWrapper(PatientGame(high=10, max_turns=50), [EchoTool()], max_tool_uses=max_tool_uses, **shaping)
    env.reset(seed=0)
    right = guess(env)
    calls = _actions(env, moves)
    right_alone = play(env, [right])
    with_right = play(env, [*calls, right])
    with_wrong = play(env, [*calls, wrong_guess(env), "\\boxed{0}"])
    one_call = shaping.get("tool_reward", 0) + shaping.get("tool_success_reward", 0)
    cap = shaping.get("max_tool_reward_per_episode", max(one_call, 0.0))
    assert with_right <= right_alone + cap + 1e-9, (shaping, moves, with_right)
    assert with_wrong < with_right, (shaping, moves, with_wrong, with_right)
    no_penalty = shaping.get("tool_reward", 0) >= 0 and shaping.get("tool_execute_error_reward", 0) == 0
    if no_penalty:  # then any calls and a wrong answer lose to a right answer alone
        assert with_wrong <= 0.0 < right_alone <= with_right
    if "max_tool_reward_per_episode" not in shaping:  # default cap: no call beyond the first pays
        assert with_right <= play(env, [*_actions(env, ("new",)), right]) + 1e-9


@pytest.mark.parametrize("shaping", SHAPINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_no_sequence_of_calls_raises_a_right_answer_above_the_cap(shaping):
    for length in range(5):
        for moves in itertools.product(MOVES, repeat=length):
            _check_padding_cannot_pay(shaping, moves)
    rng = random.Random(0)
    for _ in range(200):  # longer episodes, past the tool budget
        _check_padding_cannot_pay(shaping, tuple(rng.choices(MOVES, k=rng.randint(5, 14))), max_tool_uses=6)


if given is not None:

    @settings(max_examples=300, deadline=None)
    @given(
        shaping=st.sampled_from(SHAPINGS),
        moves=st.lists(st.sampled_from(MOVES), max_size=16).map(tuple),
        max_tool_uses=st.one_of(st.none(), st.integers(0, 12)),
    )
    def test_padding_never_pays_for_any_calls(shaping, moves, max_tool_uses):
        _check_padding_cannot_pay(shaping, moves, max_tool_uses)

else:

    def test_padding_never_pays_for_any_calls():
        pytest.skip("hypothesis is not installed (the exhaustive test above still ran)")
