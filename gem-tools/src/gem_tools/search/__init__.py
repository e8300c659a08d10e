"""Search: a local BM25 index, GEM's retrieval-server protocol (client and server), and
the search tool."""

from gem_tools.search.bm25 import BM25Index, Hit
from gem_tools.search.client import RetrievalClient
from gem_tools.search.tool import SearchTool, format_passages

__all__ = ["BM25Index", "Hit", "RetrievalClient", "SearchTool", "format_passages"]
