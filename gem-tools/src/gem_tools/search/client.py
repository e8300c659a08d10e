"""A client for GEM's retrieval-server protocol.

``POST {url}`` with ``{"queries": [...], "topk": k, "return_scores": true}`` encoded as
msgpack (GEM's server) or JSON (Search-R1's server); the reply's ``result`` holds, per
query, a list of ``{"document": {"contents": ...}, "score": ...}``.
"""

from __future__ import annotations

from typing import Any, Literal

import httpx
import msgspec

from gem_tools.search.bm25 import Hit


class RetrievalClient:
    """Sync and async calls to a retrieval server.

    >>> client = RetrievalClient("http://127.0.0.1:8000/retrieve")  # doctest: +SKIP
    >>> client.search("capital of France", topk=3)[0].document["contents"]  # doctest: +SKIP
    """

    def __init__(self, url: str, timeout: float = 5.0, encoding: Literal["msgpack", "json"] = "msgpack") -> None:
        if encoding not in ("msgpack", "json"):
            raise ValueError(f"encoding must be 'msgpack' or 'json', got {encoding!r}")
        self.url = url
        self.timeout = timeout
        self.encoding = encoding

    def _encode(self, queries: list[str], topk: int) -> tuple[bytes, dict[str, str]]:
        payload = {"queries": queries, "topk": topk, "return_scores": True}
        if self.encoding == "json":
            return msgspec.json.encode(payload), {"content-type": "application/json"}
        return msgspec.msgpack.encode(payload), {"content-type": "application/msgpack"}

    def _decode(self, response: httpx.Response) -> list[list[Hit]]:
        response.raise_for_status()
        if self.encoding == "json":
            data = msgspec.json.decode(response.content)
        else:
            data = msgspec.msgpack.decode(response.content)
        return [[_hit(item) for item in row] for row in data["result"]]

    def batch_search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        body, headers = self._encode(queries, topk)
        with httpx.Client(timeout=self.timeout) as http:
            return self._decode(http.post(self.url, content=body, headers=headers))

    def search(self, query: str, topk: int = 3) -> list[Hit]:
        return self.batch_search([query], topk)[0]

    async def abatch_search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        body, headers = self._encode(queries, topk)
        async with httpx.AsyncClient(timeout=self.timeout) as http:
            return self._decode(await http.post(self.url, content=body, headers=headers))

    async def asearch(self, query: str, topk: int = 3) -> list[Hit]:
        return (await self.abatch_search([query], topk))[0]


def _hit(item: Any) -> Hit:
    # servers started without return_scores send bare documents
    if isinstance(item, dict) and "document" in item:
        return Hit(dict(item["document"]), float(item.get("score", 0.0)))
    return Hit(dict(item), 0.0)
