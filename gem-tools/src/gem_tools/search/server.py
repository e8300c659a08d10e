"""A retrieval server speaking GEM's protocol, backed by a local BM25 index.

    python -m gem_tools.search.server --corpus wiki.jsonl --port 8000

serves ``POST /retrieve`` (msgpack or JSON in, the same out) in both request shapes:
the reference GEM's ``{"query": q, ...}`` (``result`` is that query's hits) and
Search-R1's ``{"queries": [...], ...}`` (``result`` holds one list per query), so the
reference's ``SearchTool``, Search-R1 clients and
:class:`~gem_tools.search.client.RetrievalClient` can all use it.
"""

from __future__ import annotations

import argparse
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import msgspec

from gem_tools.search.bm25 import BM25Index


class _Request(msgspec.Struct, kw_only=True):
    query: str | None = None
    queries: list[str] | None = None
    topk: int | None = None
    return_scores: bool = False


def make_server(index: BM25Index, host: str = "127.0.0.1", port: int = 0, default_topk: int = 3) -> ThreadingHTTPServer:
    """An HTTP server (not yet serving) answering ``POST /retrieve`` from ``index``.

    >>> server = make_server(BM25Index([{"contents": "a\\nb"}]))  # doctest: +SKIP
    >>> threading.Thread(target=server.serve_forever, daemon=True).start()  # doctest: +SKIP
    """
    lock = threading.Lock()  # bm25s retrieval is not documented as thread-safe

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/retrieve":
                self.send_error(404, "only POST /retrieve")
                return
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            as_json = body.lstrip().startswith(b"{")
            try:
                request = (msgspec.json if as_json else msgspec.msgpack).decode(body, type=_Request)
            except msgspec.DecodeError as exc:
                self.send_error(400, f"bad request: {exc}")
                return
            if (request.query is None) == (request.queries is None):
                self.send_error(422, "send exactly one of 'query' (a string) or 'queries' (a list)")
                return
            queries = [request.query] if request.query is not None else request.queries
            with lock:
                results = index.batch_search(queries, request.topk or default_topk)
            rows = [
                [{"document": h.document, "score": h.score} if request.return_scores else h.document for h in row]
                for row in results
            ]
            result = rows[0] if request.query is not None else rows
            payload = (msgspec.json if as_json else msgspec.msgpack).encode({"result": result})
            self.send_response(200)
            self.send_header("content-type", "application/json" if as_json else "application/msgpack")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: one line per query drowns a training log

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a BM25 index with GEM's retrieval protocol.")
    parser.add_argument("--corpus", required=True, help="JSONL corpus: one {'contents'} or {'title','text'} per line")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--topk", type=int, default=3)
    args = parser.parse_args(argv)
    index = BM25Index.from_jsonl(args.corpus)
    server = make_server(index, args.host, args.port, args.topk)
    host, port = server.server_address[:2]
    print(f"serving {len(index)} passages on http://{host}:{port}/retrieve", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
