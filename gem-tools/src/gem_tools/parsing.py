"""Find tool calls in an agent's action text.

GEM's own formats (``<python>…</python>``, fenced ```` ```python ```` blocks,
``<search>…</search>``) and JSON calls inside ``<tool_call>…</tool_call>`` as the
Qwen / Hermes chat templates emit them::

    <tool_call>
    {"name": "python", "arguments": {"code": "print(1)"}}
    </tool_call>

Every finder returns the *first* match and where it ends, so a tool can report the
text up to the end of the call (GEM's ``parsed_action``). The text is the agent's, so
every finder is bounded: finders scan with ``str.find`` rather than lazy regexes (an
action full of opening tags and no closing one stays linear time), :func:`find_json_call`
looks at the first :data:`MAX_CALLS` ``<tool_call>`` blocks only, and a body longer than
:data:`MAX_CALL_BYTES` or nested deeper than :data:`MAX_JSON_DEPTH` is not a call (JSON
decoding recurses, and ``[`` × 1000 would raise ``RecursionError``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE_OPEN = re.compile(r"```\n?python\b[ \t]*\n?")

#: ``<tool_call>`` blocks :func:`find_json_call` considers; later ones are not calls
MAX_CALLS = 8
#: longest ``<tool_call>`` body (characters) that is parsed; a longer one is not a call
MAX_CALL_BYTES = 64 * 1024
#: deepest JSON nesting of a call body; a deeper one is not a call
MAX_JSON_DEPTH = 32
# what the depth check looks at: escape pairs (skipped), quotes, brackets
_JSON_TOKENS = re.compile(r'\\.|["\[\]{}]', re.DOTALL)


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
    also be a JSON string) or the ``<tool_name>``/``<arguments>`` XML form. Only the
    first :data:`MAX_CALLS` blocks are considered, so the cost is bounded by
    ``MAX_CALLS * MAX_CALL_BYTES`` plus one ``str.find`` pass, whatever the action holds.

    >>> find_json_call('<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>').name
    'search'
    >>> find_json_call("<tool_call>" + "[" * 1000 + "</tool_call>") is None
    True
    """
    pos = 0
    for _ in range(MAX_CALLS):
        m = _between(action, "<tool_call>", "</tool_call>", pos)
        if m is None:
            return None
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


def _json_depth_ok(text: str) -> bool:
    """Whether ``text`` nests brackets at most :data:`MAX_JSON_DEPTH` deep (brackets inside
    strings do not count). One pass over the tokens that matter: escape pairs, quotes and
    brackets."""
    depth = 0
    in_string = False
    for token in _JSON_TOKENS.findall(text):
        if token[0] == "\\":
            continue
        if token == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif token in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return False
        else:
            depth -= 1
            if depth < 0:
                return False  # closes more than it opened: not JSON anyway
    return True


def _load_json(text: str) -> tuple[bool, Any]:
    """``(True, value)`` for bounded, valid JSON, else ``(False, None)``; never raises."""
    if len(text) > MAX_CALL_BYTES or not _json_depth_ok(text):
        return False, None
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _split_xml_call(body: str) -> tuple[str, str] | None:
    """``(name, raw arguments)`` of a body that is exactly ``<tool_name>N</tool_name>
    <arguments>A</arguments>`` (whitespace around the parts allowed), else ``None``.

    Plain ``str.find``: a lazy regex over this shape backtracks quadratically on a body
    that repeats the opening tags without their closing ones.
    """
    text = body.strip()
    name_open, name_close, args_open, args_close = "<tool_name>", "</tool_name>", "<arguments>", "</arguments>"
    if not text.startswith(name_open) or not text.endswith(args_close):
        return None
    name_end = text.find(name_close, len(name_open))
    if name_end < 0:
        return None
    rest = text[name_end + len(name_close) :].lstrip()
    if not rest.startswith(args_open):
        return None
    return text[len(name_open) : name_end], rest[len(args_open) : -len(args_close)]


def _parse_call_body(body: str) -> tuple[str, dict[str, Any]] | None:
    if len(body) > MAX_CALL_BYTES:
        return None
    xml = _split_xml_call(body)
    if xml is not None:
        name, raw = xml[0].strip(), xml[1].strip()
        ok, arguments = _load_json(raw) if raw else (True, {})
        if not ok:
            return None
    else:
        ok, data = _load_json(body.strip())
        if not ok or not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None
        name = data["name"]
        arguments = data.get("arguments", data.get("parameters", {}))
        if isinstance(arguments, str):
            ok, arguments = _load_json(arguments)
            if not ok:
                return None
    if not isinstance(arguments, dict):
        return None
    return name, arguments
