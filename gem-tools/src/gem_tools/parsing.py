"""Find tool calls in an agent's action text.

GEM's own formats (``<python>…</python>``, fenced ```` ```python ```` blocks,
``<search>…</search>``) and JSON calls inside ``<tool_call>…</tool_call>`` as the
Qwen / Hermes chat templates emit them::

    <tool_call>
    {"name": "python", "arguments": {"code": "print(1)"}}
    </tool_call>

Every finder returns the *first* match and where it ends, so a tool can report the
text up to the end of the call (GEM's ``parsed_action``). Finders scan with
``str.find`` rather than lazy regexes: an action full of opening tags and no closing
one stays linear time.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE_OPEN = re.compile(r"```\n?python\b[ \t]*\n?")
# the XML flavour the reference's MCP tool asks for
_XML_CALL = re.compile(r"^\s*<tool_name>(.*?)</tool_name>\s*<arguments>(.*?)</arguments>\s*$", re.DOTALL)


@dataclass(frozen=True)
class Match:
    """One call found in the text: what it holds and the span it covers."""

    content: str
    start: int
    end: int


@dataclass(frozen=True)
class JsonCall:
    """A ``<tool_call>`` with a function name and its arguments."""

    name: str
    arguments: dict[str, Any]
    start: int
    end: int


def find_tag(action: str, tag: str) -> Match | None:
    """The first ``<tag>…</tag>``.

    >>> find_tag("think <python>print(1)</python> more", "python").content
    'print(1)'
    """
    return _between(action, f"<{tag}>", f"</{tag}>")


def find_fenced_python(action: str) -> Match | None:
    """The first fenced ```` ```python ```` block.

    >>> find_fenced_python("```python\\nx = 1\\n```").content
    'x = 1\\n'
    """
    m = _FENCE_OPEN.search(action)
    if m is None:
        return None
    close = action.find("```", m.end())
    return None if close < 0 else Match(action[m.end() : close], m.start(), close + 3)


def find_json_call(action: str, names: set[str] | None = None) -> JsonCall | None:
    """The first ``<tool_call>`` whose body is a call (to one of ``names``, if given).

    Bodies are Hermes/Qwen JSON (``{"name": ..., "arguments": {...}}``, arguments may
    also be a JSON string) or the ``<tool_name>``/``<arguments>`` XML form.

    >>> find_json_call('<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>').name
    'search'
    """
    pos = 0
    while (m := _between(action, "<tool_call>", "</tool_call>", pos)) is not None:
        pos = m.end
        call = _parse_call_body(m.content)
        if call is None:
            continue
        name, arguments = call
        if names is not None and name not in names:
            continue
        return JsonCall(name, arguments, m.start, m.end)
    return None


def _between(text: str, open_: str, close: str, pos: int = 0) -> Match | None:
    """The first ``open_ … close`` at or after ``pos`` (shortest content)."""
    start = text.find(open_, pos)
    if start < 0:
        return None
    end = text.find(close, start + len(open_))
    if end < 0:
        return None
    return Match(text[start + len(open_) : end], start, end + len(close))


def _parse_call_body(body: str) -> tuple[str, dict[str, Any]] | None:
    xml = _XML_CALL.match(body)
    if xml:
        name, raw = xml.group(1).strip(), xml.group(2).strip()
        try:
            arguments = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return None
    else:
        try:
            data = json.loads(body.strip())
        except json.JSONDecodeError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None
        name = data["name"]
        arguments = data.get("arguments", data.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                return None
    if not isinstance(arguments, dict):
        return None
    return name, arguments
