"""The search tool: ``<search>query</search>`` answered from a local index or a server."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from gem_tools.base import Tool, ToolCall, ToolResult
from gem_tools.parsing import find_json_call, find_tag
from gem_tools.search.bm25 import BM25Index, Hit
from gem_tools.search.client import Protocol, RetrievalClient

INSTRUCTION = (
    "You can use a search engine to answer the question.\n"
    "- Reason inside <think> ... </think>.\n"
    "- When you lack knowledge, search with <search> your query </search>; results come back inside "
    "<information> ... </information>. Search as often as you need.\n"
    "- Give the final, concise answer inside <answer> ... </answer>.\n"
    "Example:\n"
    "<think> I need the capital of France. </think>\n"
    "<search> capital of France </search>\n"
    "<information> Doc 1(Title: Paris) Paris is the capital of France. </information>\n"
    "<think> It is Paris. </think>\n"
    "<answer> Paris </answer>"
)


NEEDS_ONE_SOURCE = (
    "SearchTool needs exactly one source: search_url= (a GEM retrieval server; "
    "or set SEARCH_URL), corpus= (a local JSONL file; GEM_SEARCH_CORPUS for the "
    "registered wrappers) or index= (a BM25Index)"
)

#: longer queries are cut to this many characters: BM25's cost grows with the query's
#: distinct terms, and no search needs more
MAX_QUERY_CHARS = 1000


def format_passages(hits: list[Hit]) -> str:
    """GEM's passage text: ``Doc i(Title: first line) rest``, one per line."""
    lines = []
    for i, hit in enumerate(hits, start=1):
        title, _, text = hit.document["contents"].partition("\n")
        lines.append(f"Doc {i}(Title: {title}) {text}\n")
    return "".join(lines)


class SearchTool(Tool):
    """Search over a :class:`BM25Index` (``index=`` or ``corpus=`` JSONL path) or a
    retrieval server (``search_url=``; without any source, ``$SEARCH_URL``, read again at
    the first call; a tool with no source at all builds, and its first call raises
    ``ValueError``, as the reference's does).

    The observation is the reference's passage text (:func:`format_passages`) inside
    ``<information>…</information>``: the instruction, ours and the reference's, tells
    the model that results come inside those tags (Search-R1's format), though the
    reference's current tool leaves them out.

    The reference's signature works as written, ``SearchTool(num_workers=1,
    search_url=None, topk=3, timeout=5)``: ``num_workers`` is accepted and unused (calls
    are concurrent through :meth:`aexecute`). ``protocol`` is the request shape (see
    :mod:`gem_tools.search.client`): by default the reference server's ``{"query": ...}``,
    falling back to Search-R1's ``{"queries": [...]}`` if the server refuses it.

    >>> tool = SearchTool(index=BM25Index([{"title": "Paris", "text": "capital of France"}]))
    >>> "Paris" in tool.execute_action("<search>capital of France</search>").observation
    True
    """

    name = "search"
    tool_type = "search"
    description = "Search a passage corpus and return the best-matching passages."
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to search for."}},
        "required": ["query"],
    }

    def __init__(
        self,
        num_workers: int = 1,
        search_url: str | None = None,
        topk: int = 3,
        timeout: float = 5,
        *,
        corpus: str | Path | None = None,
        index: BM25Index | None = None,
        encoding: str = "msgpack",
        protocol: Protocol = "auto",
    ) -> None:
        if search_url is None and corpus is None and index is None:
            search_url = os.environ.get("SEARCH_URL") or None  # the reference reads it too
        if sum(x is not None for x in (search_url, corpus, index)) > 1:
            raise ValueError(NEEDS_ONE_SOURCE)
        self.topk = topk
        self.timeout = timeout
        self.encoding, self.protocol = encoding, protocol
        self.search_url = search_url
        self.client = RetrievalClient(search_url, timeout, encoding, protocol) if search_url else None  # type: ignore[arg-type]
        self.index = index if index is not None else (BM25Index.from_jsonl(corpus) if corpus is not None else None)

    def _ensure_source(self) -> None:
        """A tool built without a source (as the reference's ``SearchTool(topk=3)`` is)
        looks for ``SEARCH_URL`` once more at its first call, and fails there without one."""
        if self.client is not None or self.index is not None:
            return
        self.search_url = os.environ.get("SEARCH_URL") or None
        if self.search_url is None:
            raise ValueError(NEEDS_ONE_SOURCE)
        self.client = RetrievalClient(self.search_url, self.timeout, self.encoding, self.protocol)  # type: ignore[arg-type]

    def parse(self, action: str) -> ToolCall | None:
        found = []
        tag = find_tag(action, "search")
        if tag is not None:
            found.append((tag.end, tag.content))
        json_call = find_json_call(action, {self.name})
        if json_call is not None and isinstance(json_call.arguments.get("query"), str):
            found.append((json_call.end, json_call.arguments["query"]))
        if not found:
            return None
        end, query = min(found, key=lambda item: item[0])
        return ToolCall(self.name, {"query": query.strip()[:MAX_QUERY_CHARS]}, action[:end])

    def execute(self, call: ToolCall) -> ToolResult:
        self._ensure_source()
        try:
            if self.client is not None:
                hits = self.client.search(call.arguments["query"], self.topk)
            else:
                assert self.index is not None
                hits = self.index.search(call.arguments["query"], self.topk)
        except Exception as exc:
            return self._error(call, exc)
        return self._ok(call, hits)

    async def aexecute(self, call: ToolCall) -> ToolResult:
        self._ensure_source()
        if self.client is None:
            return await super().aexecute(call)
        try:
            hits = await self.client.asearch(call.arguments["query"], self.topk)
        except Exception as exc:
            return self._error(call, exc)
        return self._ok(call, hits)

    def _ok(self, call: ToolCall, hits: list[Hit]) -> ToolResult:
        observation = f"\n\n<information>{format_passages(hits)}</information>\n\n"
        return ToolResult(True, False, observation, call.parsed_action)

    def _error(self, call: ToolCall, exc: Exception) -> ToolResult:
        text = f"[SearchTool Error: {type(exc).__name__}: {exc}]"
        return ToolResult(True, True, f"\n\n<information>{text}</information>\n\n", call.parsed_action)

    def instruction_string(self) -> str:
        return INSTRUCTION
