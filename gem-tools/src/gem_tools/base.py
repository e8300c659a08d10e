"""The tool protocol: parse a call out of the action text, execute it, report.

A tool answers three questions about an action:

- did it contain a call to me (``parsed``)?
- did the call succeed (``not has_error``)?
- what should the agent see next (``observation``)?

:class:`ToolResult` is a 4-tuple in GEM's order ``(parsed, has_error, observation,
parsed_action)``, so code written against the reference's ``execute_action`` keeps
working.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple


@dataclass(frozen=True)
class ToolCall:
    """A call found in an action: the function, its arguments, and the action text up
    to the end of the call (GEM's ``parsed_action``)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    parsed_action: str = ""


class ToolResult(NamedTuple):
    """What executing an action with a tool gave (GEM's tuple order)."""

    parsed: bool
    has_error: bool
    observation: str
    parsed_action: str

    @property
    def success(self) -> bool:
        return self.parsed and not self.has_error


NOT_PARSED = ToolResult(False, True, "", "")


class Tool(ABC):
    """Base class of tools.

    Subclasses set ``name`` (the function name in JSON calls), ``tool_type`` (GEM's
    label), ``description`` and ``parameters`` (a JSON schema), and implement
    :meth:`parse`, :meth:`execute` and :meth:`instruction_string`. Override
    :meth:`aexecute` when the tool has a native async path.

    >>> tool = PythonCodeTool()                       # doctest: +SKIP
    >>> tool.execute_action("<python>print(2 + 2)</python>")  # doctest: +SKIP
    ToolResult(parsed=True, has_error=False, observation='Code execution result: 4\\n\\n', ...)
    """

    name: str = "tool"
    tool_type: str = "base"
    description: str = ""
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    @abstractmethod
    def parse(self, action: str) -> ToolCall | None:
        """The first call to this tool in ``action``, or ``None``."""

    @abstractmethod
    def execute(self, call: ToolCall) -> ToolResult:
        """Run a parsed call (``parsed`` is True in the result)."""

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """Async :meth:`execute`; by default runs it in a worker thread."""
        return await asyncio.to_thread(self.execute, call)

    @abstractmethod
    def instruction_string(self) -> str:
        """Text appended to the first observation telling the agent how to call the tool."""

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style function schemas, for chat templates with a tools section
        (``tokenizer.apply_chat_template(messages, tools=tool.schemas())``)."""
        return [
            {
                "type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
            }
        ]

    def json_call_example(self, **arguments: Any) -> str:
        """A ``<tool_call>`` for this tool, as a Hermes/Qwen template would render it."""
        return "<tool_call>\n" + json.dumps({"name": self.name, "arguments": arguments}) + "\n</tool_call>"

    def execute_action(self, action: str) -> ToolResult:
        """Parse ``action`` and execute the call if there is one."""
        call = self.parse(action) if isinstance(action, str) else None
        return NOT_PARSED if call is None else self.execute(call)

    async def aexecute_action(self, action: str) -> ToolResult:
        """Async :meth:`execute_action`."""
        call = self.parse(action) if isinstance(action, str) else None
        return NOT_PARSED if call is None else await self.aexecute(call)

    def close(self) -> None:
        """Release connections or processes; the default holds none."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class ReferenceTool(Tool):
    """Base class for tools written against the reference package's ``BaseTool`` (which
    ``gem.tools.base_tool.BaseTool`` names): a subclass implements
    :meth:`instruction_string` and ``execute_action(action)`` returning ``(is_valid,
    has_error, observation, parsed_action)``, one call that both finds and runs the call.

    The tool wrapper asks tools to :meth:`parse` an action first; here parsing is that
    one call, and :meth:`execute` hands back what it returned.

    >>> class Echo(ReferenceTool):
    ...     tool_type = "echo"
    ...     def instruction_string(self):
    ...         return "Write <echo>text</echo>."
    ...     def execute_action(self, action):
    ...         found = "<echo>" in action
    ...         return found, False, action.split("<echo>")[-1] if found else "", action
    >>> Echo().parse("<echo>hi").arguments["result"].observation
    'hi'
    """

    def __init__(self, num_workers: int = 1) -> None:
        self.num_workers = num_workers

    def parse(self, action: str) -> ToolCall | None:
        is_valid, has_error, observation, parsed_action = self.execute_action(action)
        if not is_valid:
            return None
        result = ToolResult(True, bool(has_error), str(observation), str(parsed_action))
        return ToolCall(self.name, {"result": result}, result.parsed_action)

    def execute(self, call: ToolCall) -> ToolResult:
        return call.arguments["result"]

    def execute_action(self, action: str) -> Any:  # type: ignore[override]
        """``(is_valid, has_error, observation, parsed_action)`` for ``action``."""
        raise NotImplementedError(f"{type(self).__name__} must implement execute_action()")
