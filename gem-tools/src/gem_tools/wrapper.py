"""The tool wrapper: tool calls are answered by tools, everything else goes to the env."""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from typing import Any, Literal

from gem.conventions import FORMAT_ERROR
from gem.core import Env, StepResult, Wrapper
from gem_tools.base import Tool, ToolCall, ToolResult

MAX_USES_NOTE = "\n\nReached the maximum number of tool use. Please output final answer directly."

#: when a tool call's ``tool_reward``/``tool_success_reward`` is paid
RewardCredit = Literal["on_correct", "immediate"]


class ToolEnvWrapper(Wrapper):
    """GEM's ``ToolEnvWrapper`` semantics.

    When the action holds a tool call (and fewer than ``max_tool_uses`` calls were made
    this episode), the first tool that parses it executes it and its output is the next
    observation; the env is not stepped. Otherwise the action goes to the env. Each tool
    call earns ``tool_reward``, plus ``tool_success_reward`` when it succeeded; with
    ``tool_execute_error_reward`` (negative, exclusive of the other two) a failed call
    earns that instead.

    When the earned tool reward is paid is ``tool_reward_credit``:

    - ``"on_correct"`` (default): tool steps return 0; a call earns ``tool_reward +
      tool_success_reward`` only when it succeeded and is not a repeat of an earlier call
      of the episode (same tool, same arguments up to whitespace); the episode's earnings,
      capped at ``max_tool_reward_per_episode``, are added to the reward of the step that
      ends the episode, only if the answer was right (``info["correct"]``, or a positive
      reward where the env sets no ``correct``). The default cap is one call's worth, so
      padding a right answer with more calls never raises its return, and junk or failed
      calls followed by a wrong answer (or no answer) earn nothing. Penalties
      (``tool_execute_error_reward``) are paid at once for every failed call, whatever
      the answer: for the same calls a right answer still beats a wrong one.
    - ``"immediate"``: the reference's shaping, each tool step returns its reward, with
      no cap. It can be farmed: five junk calls at the ``search_tool`` preset's 0.3 and a
      wrong answer return 1.5, more than a correct answer without tools.

    The tools belong to the caller (one tool may serve many envs): ``close`` closes the
    env, not the tools.

    ``info`` carries ``tool_use_counter``, ``tool_success_counter`` and, on tool steps,
    ``use_tool``, ``tool_type``, ``parsed_action``, ``tool_success`` and ``tool_time``
    (seconds); ``tool_time_total`` sums the episode's tool time; ``tool_reward_pending``
    is the tool reward earned and not yet paid, and the step that ends an episode says
    what was paid in ``tool_reward_credited``; ``tool_call_repeated`` marks a tool step
    whose call was made before in the episode. A tool step has ``format_error`` False;
    an action that is not a tool call goes to the env, whose ``format_error`` passes through.

    >>> env = ToolEnvWrapper(gem.make("math:GSM8K"), [PythonCodeTool()])   # doctest: +SKIP
    >>> obs, reward, terminated, truncated, info = env.step("<python>print(1)</python>")  # doctest: +SKIP
    """

    def __init__(
        self,
        env: Env,
        tools: Sequence[Tool],
        tool_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        tool_execute_error_reward: float = 0.0,
        max_tool_uses: int | None = 10,
        tool_reward_credit: RewardCredit = "on_correct",
        max_tool_reward_per_episode: float | None = None,
    ) -> None:
        """``max_tool_reward_per_episode``: the most tool reward one episode is credited
        with under ``"on_correct"``; ``None`` (default) is one call's worth,
        ``tool_reward + tool_success_reward``. A larger value lets distinct successful
        calls add up to it, which makes extra calls pay; ``"immediate"`` takes no cap."""
        super().__init__(env)
        if not tools:
            raise ValueError("ToolEnvWrapper needs at least one tool")
        if tool_execute_error_reward > 0:
            raise ValueError("tool_execute_error_reward must be negative (a penalty) or 0")
        if tool_execute_error_reward != 0 and (tool_reward != 0 or tool_success_reward != 0):
            raise ValueError("tool_execute_error_reward cannot be combined with tool_reward or tool_success_reward")
        if tool_reward_credit not in ("on_correct", "immediate"):
            raise ValueError(f"tool_reward_credit must be 'on_correct' or 'immediate', got {tool_reward_credit!r}")
        self.max_tool_reward_per_episode = _check_cap(
            max_tool_reward_per_episode, tool_reward_credit, tool_reward + tool_success_reward
        )
        self.tools = list(tools)
        self.tool_reward_credit = tool_reward_credit
        self.tool_reward = tool_reward
        self.tool_success_reward = tool_success_reward
        self.tool_execute_error_reward = tool_execute_error_reward
        self.max_tool_uses = float("inf") if max_tool_uses is None else max_tool_uses
        self.tool_use_counter = 0
        self.tool_success_counter = 0
        self.tool_time_total = 0.0
        self.tool_reward_pending = 0.0
        self.tool_calls_seen: set[str] = set()

    # -- episode ----------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, **kwargs)
        return self._after_reset(obs, info)

    async def areset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = await self.env.areset(seed=seed, **kwargs)
        return self._after_reset(obs, info)

    def _after_reset(self, obs: Any, info: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        previous = (self.tool_use_counter, self.tool_success_counter)
        self.tool_use_counter = self.tool_success_counter = 0
        self.tool_time_total = 0.0
        self.tool_reward_pending = 0.0
        self.tool_calls_seen = set()
        instructions = "\n".join(tool.instruction_string() for tool in self.tools)
        if len(self.tools) > 1:
            instructions = f"Available tools:\n{instructions}"
        info = {
            **info,
            "tool_use_counter": 0,
            "tool_success_counter": 0,
            "prev_ep_tool_use_counter": previous[0],
            "prev_ep_tool_success_counter": previous[1],
            "use_tool": False,
        }
        return f"{obs}\n{instructions}", info

    def step(self, action: str) -> StepResult:
        found = self._find_call(action)
        if found is None:
            return self._env_step(self.env.step(action))
        started = time.perf_counter()
        results = []
        for tool, call in found:
            result = tool.execute(call)
            results.append((tool, call, result))
            if result.success:
                break
        return self._tool_step(results, time.perf_counter() - started)

    async def astep(self, action: str) -> StepResult:
        found = self._find_call(action)
        if found is None:
            return self._env_step(await self.env.astep(action))
        started = time.perf_counter()
        results = []
        for tool, call in found:
            result = await tool.aexecute(call)
            results.append((tool, call, result))
            if result.success:
                break
        return self._tool_step(results, time.perf_counter() - started)

    # -- helpers ----------------------------------------------------------------------
    def _find_call(self, action: str) -> list[tuple[Tool, ToolCall]] | None:
        """The tools that parse ``action`` (in order), or None when the env should get it."""
        if self.tool_use_counter >= self.max_tool_uses or not isinstance(action, str):
            return None
        found = [(tool, call) for tool in self.tools if (call := tool.parse(action)) is not None]
        return found or None

    def _env_step(self, result: StepResult) -> StepResult:
        obs, reward, terminated, truncated, info = result
        info = {
            **info,
            "use_tool": False,
            "tool_use_counter": self.tool_use_counter,
            "tool_success_counter": self.tool_success_counter,
            "tool_time_total": self.tool_time_total,
        }
        if terminated or truncated:
            credited = self.tool_reward_pending if _answered_correctly(reward, info) else 0.0
            self.tool_reward_pending = 0.0
            reward += credited
            info["tool_reward_credited"] = credited
        info["tool_reward_pending"] = self.tool_reward_pending
        return obs, reward, terminated, truncated, info

    def _tool_step(self, results: list[tuple[Tool, ToolCall, ToolResult]], elapsed: float) -> StepResult:
        # the first success if any tool succeeded, else the first tool's failure
        tool, call, result = next((found for found in results if found[2].success), results[0])
        self.tool_use_counter += 1
        self.tool_time_total += elapsed
        if result.success:
            self.tool_success_counter += 1
        key = _call_key(tool, call)
        repeated = key in self.tool_calls_seen
        self.tool_calls_seen.add(key)
        if self.tool_reward_credit == "immediate":
            reward = self._reference_reward(result.success)
        else:
            reward = self._earn(result.success, repeated)
        observation = result.observation
        if self.tool_use_counter == self.max_tool_uses:
            observation += MAX_USES_NOTE
        info = {
            "use_tool": True,
            "tool_type": tool.tool_type,
            "tool_name": tool.name,
            "parsed_action": result.parsed_action,
            "tool_success": result.success,
            "tool_time": elapsed,
            "tool_time_total": self.tool_time_total,
            "tool_use_counter": self.tool_use_counter,
            "tool_success_counter": self.tool_success_counter,
            "tool_reward_pending": self.tool_reward_pending,
            "tool_call_repeated": repeated,
            FORMAT_ERROR: False,
        }
        return observation, reward, False, False, info

    def _reference_reward(self, success: bool) -> float:
        """The reference's reward for one call, paid at once: every call earns
        ``tool_reward``, failed ones included."""
        if not success and self.tool_execute_error_reward != 0:
            return self.tool_execute_error_reward
        return self.tool_reward + (self.tool_success_reward if success else 0.0)

    def _earn(self, success: bool, repeated: bool) -> float:
        """Add one call's earnings to the pending tool reward (up to the episode's cap)
        and return what the step pays now: penalties and costs, never a gain."""
        value = self._reference_reward(success)
        if value <= 0 or not success or repeated:
            return min(value, 0.0)
        self.tool_reward_pending = min(self.max_tool_reward_per_episode, self.tool_reward_pending + value)
        return 0.0

    # -- state ------------------------------------------------------------------------
    def get_wrapper_state(self) -> dict[str, Any]:
        return {
            "tool_use_counter": self.tool_use_counter,
            "tool_success_counter": self.tool_success_counter,
            "tool_time_total": self.tool_time_total,
            "tool_reward_pending": self.tool_reward_pending,
            "tool_calls_seen": sorted(self.tool_calls_seen),
        }

    def set_wrapper_state(self, state: dict[str, Any]) -> None:
        self.tool_use_counter = int(state.get("tool_use_counter", 0))
        self.tool_success_counter = int(state.get("tool_success_counter", 0))
        self.tool_time_total = float(state.get("tool_time_total", 0.0))
        self.tool_reward_pending = float(state.get("tool_reward_pending", 0.0))
        self.tool_calls_seen = set(state.get("tool_calls_seen", ()))


def _answered_correctly(reward: float, info: dict[str, Any]) -> bool:
    """Did the step that ended the episode answer right? The env's ``correct`` if it says,
    else a positive reward."""
    correct = info.get("correct")
    return bool(correct) if correct is not None else reward > 0


def _check_cap(cap: float | None, credit: str, one_call: float) -> float:
    """The episode's tool-reward cap, one call's worth when ``cap`` is None."""
    if cap is None:
        return max(one_call, 0.0)
    if credit == "immediate":
        raise ValueError(
            "max_tool_reward_per_episode applies to tool_reward_credit='on_correct'; "
            "'immediate' pays every call at once, as the reference does"
        )
    if not math.isfinite(cap) or cap < 0:
        raise ValueError(f"max_tool_reward_per_episode must be a finite number >= 0, got {cap!r}")
    return float(cap)


def _call_key(tool: Tool, call: ToolCall) -> str:
    """A digest naming a call by its tool and arguments, whitespace runs collapsed, so a
    call resent with other spacing or other text around it counts as a repeat."""
    arguments = {k: " ".join(v.split()) if isinstance(v, str) else v for k, v in call.arguments.items()}
    text = json.dumps([tool.name, arguments], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()
