"""A client for retrieval servers: the reference GEM's and Search-R1's request shapes.

Two shapes of ``POST {url}`` exist in the wild:

- ``"gem"``: what the reference package's ``SearchTool`` sends to its retrieval server
  (``gem/tools/search_engine/retrieval_server.py``): one query per request,
  ``{"query": q, "topk": k, "return_scores": true}``; the reply's ``result`` is that
  query's list of ``{"document": {"contents": ...}, "score": ...}``. Such a server
  answers any other shape with HTTP 422.
- ``"batch"``: Search-R1's shape, ``{"queries": [...], ...}``; ``result`` holds one list
  per query.

Bodies are msgpack (the reference's) or JSON (``encoding="json"``). With
``protocol="auto"`` (the default) the client speaks ``"gem"`` and switches to ``"batch"``
for good if the server rejects the request's shape (HTTP 400 or 422); our own server
(:mod:`gem_tools.search.server`) understands both.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import httpx
import msgspec

from gem_tools.search.bm25 import Hit

Protocol = Literal["auto", "gem", "batch"]
_SHAPE_REJECTED = (400, 422)


class RetrievalClient:
    """Sync and async calls to a retrieval server (async ones await ``httpx.AsyncClient``:
    no thread per call).

    >>> client = RetrievalClient("http://127.0.0.1:8000/retrieve")  # doctest: +SKIP
    >>> client.search("capital of France", topk=3)[0].document["contents"]  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str,
        timeout: float = 5.0,
        encoding: Literal["msgpack", "json"] = "msgpack",
        protocol: Protocol = "auto",
    ) -> None:
        if encoding not in ("msgpack", "json"):
            raise ValueError(f"encoding must be 'msgpack' or 'json', got {encoding!r}")
        if protocol not in ("auto", "gem", "batch"):
            raise ValueError(f"protocol must be 'auto', 'gem' or 'batch', got {protocol!r}")
        self.url = url
        self.timeout = timeout
        self.encoding = encoding
        self.protocol: Protocol = protocol

    # -- wire format ------------------------------------------------------------------
    def _shape(self) -> Literal["gem", "batch"]:
        return "batch" if self.protocol == "batch" else "gem"

    def _encode(self, payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        if self.encoding == "json":
            return msgspec.json.encode(payload), {"content-type": "application/json"}
        return msgspec.msgpack.encode(payload), {"content-type": "application/msgpack"}

    def _requests(self, queries: list[str], topk: int) -> list[tuple[bytes, dict[str, str]]]:
        if self._shape() == "batch":
            return [self._encode({"queries": queries, "topk": topk, "return_scores": True})]
        return [self._encode({"query": q, "topk": topk, "return_scores": True}) for q in queries]

    def _shape_rejected(self, response: httpx.Response) -> bool:
        """Whether ``response`` refuses the request's shape, so that ``"auto"`` should switch."""
        if self.protocol == "auto" and response.status_code in _SHAPE_REJECTED:
            self.protocol = "batch"
            return True
        return False

    def _decode(self, responses: list[httpx.Response], shape: str) -> list[list[Hit]]:
        rows = []
        for response in responses:
            response.raise_for_status()
            codec = msgspec.json if self.encoding == "json" else msgspec.msgpack
            result = codec.decode(response.content)["result"]
            rows += result if shape == "batch" else [result]
        return [[_hit(item) for item in row] for row in rows]

    # -- calls ------------------------------------------------------------------------
    def batch_search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        with httpx.Client(timeout=self.timeout) as http:
            while True:
                shape = self._shape()
                responses = [http.post(self.url, content=b, headers=h) for b, h in self._requests(queries, topk)]
                if not self._shape_rejected(responses[0]):
                    return self._decode(responses, shape)

    def search(self, query: str, topk: int = 3) -> list[Hit]:
        return self.batch_search([query], topk)[0]

    async def abatch_search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        async with httpx.AsyncClient(timeout=self.timeout) as http:
            while True:
                shape = self._shape()
                requests = self._requests(queries, topk)
                responses = await asyncio.gather(*(http.post(self.url, content=b, headers=h) for b, h in requests))
                if not self._shape_rejected(responses[0]):
                    return self._decode(list(responses), shape)

    async def asearch(self, query: str, topk: int = 3) -> list[Hit]:
        return (await self.abatch_search([query], topk))[0]


def _hit(item: Any) -> Hit:
    # servers started without return_scores send bare documents, or a null score
    if isinstance(item, dict) and "document" in item:
        return Hit(dict(item["document"]), float(item.get("score") or 0.0))
    return Hit(dict(item), 0.0)
