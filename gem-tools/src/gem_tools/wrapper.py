"""The tool wrapper: tool calls are answered by tools, everything else goes to the env."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal

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

    - ``"on_correct"`` (default): tool steps return 0 and the episode's positive tool
      rewards are added to the reward of the step that ends the episode, only if the
      answer was right (``info["correct"]``, or a positive reward where the env sets no
      ``correct``). So junk or failed calls followed by a wrong answer (or no answer)
      earn nothing, and a correct answer always out-scores them. Penalties
      (``tool_execute_error_reward``) are paid at once.
    - ``"immediate"``: the reference's shaping, each tool step returns its reward. It
      can be farmed: five junk calls at the ``search_tool`` preset's 0.3 and a wrong
      answer return 1.5, more than a correct answer without tools.

    The tools belong to the caller (one tool may serve many envs): ``close`` closes the
    env, not the tools.

    ``info`` carries ``tool_use_counter``, ``tool_success_counter`` and, on tool steps,
    ``use_tool``, ``tool_type``, ``parsed_action``, ``tool_success`` and ``tool_time``
    (seconds); ``tool_time_total`` sums the episode's tool time; ``tool_reward_pending``
    is the tool reward earned and not yet paid, and the step that ends an episode says
    what was paid in ``tool_reward_credited``.

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
    ) -> None:
        super().__init__(env)
        if not tools:
            raise ValueError("ToolEnvWrapper needs at least one tool")
        if tool_execute_error_reward > 0:
            raise ValueError("tool_execute_error_reward must be negative (a penalty) or 0")
        if tool_execute_error_reward != 0 and (tool_reward != 0 or tool_success_reward != 0):
            raise ValueError("tool_execute_error_reward cannot be combined with tool_reward or tool_success_reward")
        if tool_reward_credit not in ("on_correct", "immediate"):
            raise ValueError(f"tool_reward_credit must be 'on_correct' or 'immediate', got {tool_reward_credit!r}")
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
            results.append((tool, result))
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
            results.append((tool, result))
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

    def _tool_step(self, results: list[tuple[Tool, ToolResult]], elapsed: float) -> StepResult:
        # the first success if any tool succeeded, else the first tool's failure
        tool, result = next(((t, r) for t, r in results if r.success), results[0])
        self.tool_use_counter += 1
        self.tool_time_total += elapsed
        reward = self.tool_reward
        if result.success:
            self.tool_success_counter += 1
            reward += self.tool_success_reward
        elif self.tool_execute_error_reward != 0:
            reward = self.tool_execute_error_reward
        if self.tool_reward_credit == "on_correct" and reward > 0:
            self.tool_reward_pending += reward
            reward = 0.0
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
        }
        return observation, reward, False, False, info

    # -- state ------------------------------------------------------------------------
    def get_wrapper_state(self) -> dict[str, Any]:
        return {
            "tool_use_counter": self.tool_use_counter,
            "tool_success_counter": self.tool_success_counter,
            "tool_time_total": self.tool_time_total,
            "tool_reward_pending": self.tool_reward_pending,
        }

    def set_wrapper_state(self, state: dict[str, Any]) -> None:
        self.tool_use_counter = int(state.get("tool_use_counter", 0))
        self.tool_success_counter = int(state.get("tool_success_counter", 0))
        self.tool_time_total = float(state.get("tool_time_total", 0.0))
        self.tool_reward_pending = float(state.get("tool_reward_pending", 0.0))


def _answered_correctly(reward: float, info: dict[str, Any]) -> bool:
    """Did the step that ended the episode answer right? The env's ``correct`` if it says,
    else a positive reward."""
    correct = info.get("correct")
    return bool(correct) if correct is not None else reward > 0
