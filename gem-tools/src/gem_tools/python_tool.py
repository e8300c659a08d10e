"""The Python tool: run the agent's code in the sandbox and show it the output."""

from __future__ import annotations

from typing import Any, ClassVar

from gem_tools.base import Tool, ToolCall, ToolResult
from gem_tools.parsing import find_fenced_python, find_json_call, find_tag
from gem_tools.sandbox import Limits, Sandbox, SandboxResult, Status

#: names a JSON ``<tool_call>`` may use for this tool
CALL_NAMES = {"python", "python_code", "code_interpreter"}

INSTRUCTION = (
    "Solve the above problem step by step. You can write Python code to help your reasoning: "
    "wrap a complete script, with its imports, in <python>...</python> tags or in a ```python ... ``` block. "
    "It runs in a sandbox (no network, no files of yours) and what it prints comes back after "
    '"Code execution result: ". Put your final answer within \\boxed{}.'
)


class PythonCodeTool(Tool):
    """Runs ``<python>…</python>``, ```` ```python ```` or ``<tool_call>`` code in a :class:`Sandbox`.

    >>> tool = PythonCodeTool(timeout=5)                                   # doctest: +SKIP
    >>> tool.execute_action("<python>print(6 * 7)</python>").observation  # doctest: +SKIP
    'Code execution result: 42\\n\\n'

    ``keep_error_last_line`` shows only the last line of stderr (the exception), as
    GEM's option of that name does. The code sees the standard library and, of the
    installed packages, only ``packages`` (e.g. ``("numpy", "sympy", "mpmath")``): never
    the environment's site-packages, where a dataset wheel with the answers may live.
    The reference's ``sandbox_type`` is accepted: ``"bwrap"`` selects that backend;
    ``"none"`` (its default, no isolation there) still runs in the best sandbox
    available here, since agent code is never run bare.
    """

    name = "python"
    tool_type = "python_code"
    description = "Run a Python script in a sandbox and return what it prints."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "A complete Python script."}},
        "required": ["code"],
    }

    def __init__(
        self,
        timeout: float = 5,
        sandbox_type: str | None = None,
        keep_error_last_line: bool = False,
        *,
        sandbox: Sandbox | None = None,
        backend: str = "auto",
        limits: Limits | None = None,
        python: str | None = None,
        packages: tuple[str, ...] = (),
    ) -> None:
        if sandbox_type not in (None, "none", "bwrap"):
            raise ValueError(f"sandbox_type must be 'bwrap' or 'none' (the reference's values), got {sandbox_type!r}")
        if sandbox_type == "bwrap":
            backend = "bwrap"
        self.timeout = timeout
        self.keep_error_last_line = keep_error_last_line
        base = limits or Limits()
        self.sandbox = sandbox or Sandbox(
            backend=backend, limits=base.with_(timeout=timeout), python=python, packages=packages
        )  # fmt: skip

    def parse(self, action: str) -> ToolCall | None:
        found = []
        for match in (find_tag(action, "python"), find_fenced_python(action)):
            if match is not None:
                found.append((match.end, match.content))
        json_call = find_json_call(action, CALL_NAMES)
        if json_call is not None and isinstance(json_call.arguments.get("code"), str):
            found.append((json_call.end, json_call.arguments["code"]))
        if not found:
            return None
        # the call that ends first is the one the agent is waiting on
        end, code = min(found, key=lambda item: item[0])
        return ToolCall(self.name, {"code": code.strip()}, action[:end])

    def execute(self, call: ToolCall) -> ToolResult:
        result = self.sandbox.run_python(call.arguments.get("code", ""))
        return self._result(result, call)

    async def aexecute(self, call: ToolCall) -> ToolResult:
        # awaited on the event loop: many calls in flight hold no threads
        result = await self.sandbox.arun_python(call.arguments.get("code", ""))
        return self._result(result, call)

    def _result(self, result: SandboxResult, call: ToolCall) -> ToolResult:
        stdout, stderr = result.stdout, result.stderr.strip()
        if result.stdout_truncated:
            stdout += "\n[output truncated]"
        if result.status is Status.TIMEOUT:
            note = f"Execution timed out after {self.timeout} seconds."  # the reference's words
            stderr = (stderr + "\n" if stderr else "") + note
        elif result.status is Status.LIMIT and result.limit in ("cpu", "output"):
            stderr = (stderr + "\n" if stderr else "") + f"ResourceLimitError: the {result.limit} limit was reached"
        elif result.status is Status.KILLED:
            stderr = (stderr + "\n" if stderr else "") + f"Killed by signal {-(result.exit_code or 0)}"
        if stderr and self.keep_error_last_line:
            stderr = stderr.rsplit("\n", 1)[-1]
        text = f"{stdout}\n{stderr}" if stderr else stdout
        observation = "Code execution result: " + text.lstrip(" \n") + "\n"
        return ToolResult(True, not result.ok, observation, call.parsed_action)

    def instruction_string(self) -> str:
        return INSTRUCTION
