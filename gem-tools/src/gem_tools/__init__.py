"""gem-tools: a sandbox, the tool protocol, Python / search / MCP tools and the tool wrapper.

>>> from gem_tools import PythonCodeTool, ToolEnvWrapper   # doctest: +SKIP
>>> env = ToolEnvWrapper(my_env, tools=[PythonCodeTool()])  # doctest: +SKIP

Names load lazily so that ``import gem_tools`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "Tool": "gem_tools.base",
    "ToolCall": "gem_tools.base",
    "ToolResult": "gem_tools.base",
    "PythonCodeTool": "gem_tools.python_tool",
    "SearchTool": "gem_tools.search",
    "BM25Index": "gem_tools.search",
    "MCPTool": "gem_tools.mcp_tool",
    "ToolEnvWrapper": "gem_tools.wrapper",
    "Sandbox": "gem_tools.sandbox",
    "Limits": "gem_tools.sandbox",
}

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'gem_tools' has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
