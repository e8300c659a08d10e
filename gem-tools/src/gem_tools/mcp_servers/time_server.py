"""An MCP server of date and time tools, built on the official ``mcp`` SDK.

The tools and their arguments are those of the reference package's sample server
(``gem.tools.mcp_server.time_mcp``, which resolves here): ``current_time``,
``relative_time``, ``days_in_month``, ``get_timestamp``, ``convert_time`` and
``get_week_year``. Times are ``YYYY-MM-DD HH:mm:ss[.SSS]`` in the machine's local time
zone unless a tool takes an IANA zone name.

Run it::

    python -m gem_tools.mcp_servers.time_server --transport streamable-http --port 8081 --path /time-mcp
    python -m gem_tools.mcp_servers.time_server --transport stdio

In-process, ``await app.get_tool("current_time")`` returns a handle whose ``await
run({...})`` gives the call's result (``result.content[0].text``), as the reference's tests
use it.
"""

from __future__ import annotations

import argparse
import calendar
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.types import ToolAnnotations

try:
    from mcp.server.mcpserver import MCPServer
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

#: Moment.js format tokens -> strftime directives, longest first so that ``YYYY`` wins over ``YY``
_TOKENS = (
    ("YYYY", "%Y"), ("YY", "%y"), ("MM", "%m"), ("DD", "%d"), ("HH", "%H"), ("hh", "%I"),
    ("h", "%-I"), ("mm", "%M"), ("ss", "%S"), ("A", "%p"),
)


class _ToolHandle:
    """One tool of :class:`TimeServer`, callable in-process."""

    def __init__(self, server: TimeServer, name: str) -> None:
        self.server, self.name = server, name

    async def run(self, arguments: dict[str, Any]) -> Any:
        """Call the tool; the result has ``content`` (a list of text blocks)."""
        result = await self.server.call_tool(self.name, arguments)
        if hasattr(result, "content"):
            return result
        content = result[0] if isinstance(result, tuple) else result  # mcp 1.x shapes
        return _Result(list(content))


class _Result:
    def __init__(self, content: list[Any]) -> None:
        self.content = content


class TimeServer(MCPServer):
    """The SDK's server plus :meth:`get_tool`, the in-process handle the reference's tests use."""

    async def get_tool(self, name: str) -> _ToolHandle:
        """A handle on tool ``name`` (``KeyError`` if the server has none of that name)."""
        names = {tool.name for tool in await self.list_tools()}
        if name not in names:
            raise KeyError(f"no tool {name!r}; this server has {sorted(names)}")
        return _ToolHandle(self, name)


app = TimeServer("gem-time")


def _local_tz() -> tzinfo:
    return datetime.now().astimezone().tzinfo or timezone.utc


def _zone(name: str | None) -> tzinfo:
    if not name:
        return _local_tz()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as 'Europe/London'") from None


def _moment_to_strftime(fmt: str) -> str:
    """Translate a Moment.js-style format (``YYYY-MM-DD HH:mm:ss``, ``h:mm A``, ...) to strftime."""
    out, i = [], 0
    while i < len(fmt):
        for token, directive in _TOKENS:
            if fmt.startswith(token, i):
                out.append(directive)
                i += len(token)
                break
        else:
            out.append("%%" if fmt[i] == "%" else fmt[i])
            i += 1
    return "".join(out)


def _parse_naive(text: str) -> datetime:
    """``YYYY-MM-DD HH:mm:ss`` with optional fractional seconds, as a naive datetime."""
    main, dot, fraction = text.strip().partition(".")
    moment = datetime.strptime(main, "%Y-%m-%d %H:%M:%S")
    if dot:
        if not fraction.isdigit():
            raise ValueError(f"bad fractional seconds in {text!r}")
        moment = moment.replace(microsecond=int((fraction + "000000")[:6]))
    return moment


def _parse_dt(text: str) -> datetime:
    """``YYYY-MM-DD HH:mm:ss[.SSS]`` in the local time zone."""
    return _parse_naive(text).replace(tzinfo=_local_tz())


def _parse_date(text: str) -> datetime:
    """``YYYY-MM-DD`` at midnight in the local time zone."""
    return datetime.strptime(text.strip(), "%Y-%m-%d").replace(tzinfo=_local_tz())


def _read_only(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, readOnlyHint=True)


@app.tool(annotations=_read_only("Current date and time"))
def current_time(format: str = "YYYY-MM-DD HH:mm:ss", timezone: str | None = None) -> str:
    """The current date/time in a Moment.js-style format (YYYY-MM-DD HH:mm:ss, YYYY-MM-DD,
    MM/DD/YYYY, h:mm A, ...), in an IANA time zone (default: the server's)."""
    return datetime.now(tz=_zone(timezone)).strftime(_moment_to_strftime(format))


@app.tool(annotations=_read_only("Relative time from now"))
def relative_time(time: str) -> str:
    """How far 'YYYY-MM-DD HH:mm:ss' is from now, in the largest whole unit:
    'in 3 hours' or '2 days ago'."""
    seconds = int((_parse_dt(time) - datetime.now(tz=_local_tz())).total_seconds())
    amount, unit = abs(seconds), "seconds"
    for size, name in ((60, "minutes"), (60, "hours"), (24, "days"), (30, "months"), (12, "years")):
        if amount < size:
            break
        amount, unit = amount // size, name
    return f"in {amount} {unit}" if seconds > 0 else f"{amount} {unit} ago"


@app.tool(annotations=_read_only("Days in a month"))
def days_in_month(date: str | None = None) -> str:
    """The number of days in the month of 'YYYY-MM-DD' (default: this month)."""
    moment = _parse_date(date) if date else datetime.now(tz=_local_tz())
    return str(calendar.monthrange(moment.year, moment.month)[1])


@app.tool(annotations=_read_only("Unix timestamp in milliseconds"))
def get_timestamp(time: str) -> str:
    """Milliseconds since the Unix epoch of local time 'YYYY-MM-DD HH:mm:ss[.SSS]'."""
    return str((_parse_dt(time) - _EPOCH) // timedelta(milliseconds=1))


@app.tool(annotations=_read_only("Convert a time between time zones"))
def convert_time(sourceTimezone: str, targetTimezone: str, time: str) -> str:
    """'YYYY-MM-DD HH:mm:ss' read in one IANA time zone, shown in another."""
    moment = _parse_naive(time).replace(tzinfo=_zone(sourceTimezone))
    return moment.astimezone(_zone(targetTimezone)).strftime("%Y-%m-%d %H:%M:%S")


@app.tool(annotations=_read_only("Week number and ISO week number"))
def get_week_year(date: str | None = None) -> str:
    """'week: W, isoWeek: I' for 'YYYY-MM-DD' (default: today); W counts weeks from the
    year's first Monday (strftime %W), I is the ISO-8601 week."""
    moment = _parse_date(date) if date else datetime.now(tz=_local_tz())
    return f"week: {int(moment.strftime('%W'))}, isoWeek: {moment.isocalendar()[1]}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="An MCP server of date and time tools.")
    parser.add_argument("--transport", choices=["stdio", "http", "streamable-http"], default="streamable-http")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--path", default="/time-mcp", help="the HTTP endpoint's path")
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        app.run("stdio")
    else:
        try:
            app.run("streamable-http", host=args.host, port=args.port, streamable_http_path=args.path)
        except TypeError:  # mcp 1.x (e.g. beside openenv, whose fastmcp pins it) takes these as settings
            app.settings.host, app.settings.port, app.settings.streamable_http_path = args.host, args.port, args.path
            app.run("streamable-http")


if __name__ == "__main__":
    main()
