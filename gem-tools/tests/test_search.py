"""BM25 search over an offline corpus, and GEM's retrieval-server protocol against a real server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from helpers import SumEnv

from gem.wrappers import get_wrapper_fns
from gem_tools import plugin
from gem_tools.search import BM25Index, RetrievalClient, SearchTool, format_passages

PASSAGES = [
    {"title": "Paris", "text": "Paris is the capital and largest city of France."},
    {"title": "Rome", "text": "Rome is the capital city of Italy, on the Tiber river."},
    {"title": "Mount Everest", "text": "Mount Everest is Earth's highest mountain above sea level."},
    {"title": "Python (programming language)", "text": "Python is a high-level programming language."},
    {"title": "Amazon River", "text": "The Amazon is the largest river by discharge volume of water."},
    {"title": "Moon", "text": "The Moon is Earth's only natural satellite."},
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": i, **p}) + "\n" for i, p in enumerate(PASSAGES)))
    return path


@pytest.fixture(scope="module")
def server_url(corpus):
    """A real retrieval server process on 127.0.0.1, serving the corpus."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gem_tools.search.server", "--corpus", str(corpus), "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    assert line.startswith("serving 6 passages on "), line
    yield line.split(" on ")[1].strip()
    proc.terminate()
    proc.wait(timeout=10)


def test_bm25_ranks_the_relevant_passage_first(corpus):
    index = BM25Index.from_jsonl(corpus)
    assert len(index) == 6
    hits = index.search("highest mountain on Earth", topk=2)
    assert hits[0].document["title"] == "Mount Everest" and hits[0].score > 0
    assert index.search("capital of Italy")[0].document["contents"].startswith("Rome\n")
    assert index.search("zzzz qqqq") == []  # no term matches: no hits, not random ones
    assert [len(r) for r in index.batch_search(["Moon", "river"], topk=1)] == [1, 1]


def test_passages_are_formatted_like_gem(corpus):
    hits = BM25Index.from_jsonl(corpus).search("satellite", topk=1)
    assert format_passages(hits) == "Doc 1(Title: Moon) The Moon is Earth's only natural satellite.\n"


def test_search_tool_on_a_local_corpus(corpus):
    tool = SearchTool(corpus=corpus, topk=2)
    result = tool.execute_action("<think>hmm</think><search> largest river </search> rest")
    assert result.success and result.parsed_action == "<think>hmm</think><search> largest river </search>"
    assert result.observation.startswith("\n\n<information>Doc 1(Title: Amazon River)")
    assert result.observation.endswith("</information>\n\n")
    json_call = tool.json_call_example(query="programming language")
    assert "Python (programming language)" in tool.execute_action(json_call).observation
    assert tool.execute_action("<answer>Paris</answer>") == (False, True, "", "")
    assert tool.schemas()[0]["function"]["parameters"]["required"] == ["query"]


def test_search_tool_needs_exactly_one_source(corpus, monkeypatch):
    monkeypatch.delenv("SEARCH_URL", raising=False)
    tool = SearchTool()  # builds, as the reference's does; its first call fails
    with pytest.raises(ValueError, match="exactly one source"):
        tool.execute_action("<search>x</search>")
    with pytest.raises(ValueError, match="exactly one source"):
        SearchTool(search_url="http://127.0.0.1:1/retrieve", corpus=corpus)


@pytest.mark.parametrize("encoding", ["msgpack", "json"])
def test_client_against_a_real_server(server_url, encoding):
    client = RetrievalClient(server_url, encoding=encoding)
    hits = client.search("capital of France", topk=2)
    assert hits[0].document["title"] == "Paris" and len(hits) <= 2
    rows = client.batch_search(["Moon", "Everest"], topk=1)
    assert [r[0].document["title"] for r in rows] == ["Moon", "Mount Everest"]


def test_server_speaks_gems_wire_format(server_url):
    import httpx

    # exactly what GEM's SearchTool sends: a bare msgpack body
    body = msgspec.msgpack.encode({"queries": ["Tiber"], "topk": 1, "return_scores": True})
    reply = msgspec.msgpack.decode(httpx.post(server_url, content=body).content)
    (item,) = reply["result"][0]
    assert item["document"]["contents"].startswith("Rome\n") and item["score"] > 0
    bad = httpx.post(server_url, content=b"\xc1not msgpack")
    assert bad.status_code == 400


@pytest.mark.asyncio
async def test_search_tool_async_over_http(server_url):
    tool = SearchTool(search_url=server_url, topk=1)
    result = await tool.aexecute_action("<search>natural satellite</search>")
    assert result.success and "Title: Moon" in result.observation


def test_unreachable_server_is_a_failed_call_not_a_crash():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once we leave: nothing listens there
    tool = SearchTool(search_url=f"http://127.0.0.1:{port}/retrieve", timeout=2)
    result = tool.execute_action("<search>x</search>")
    assert result.parsed and result.has_error and "SearchTool Error" in result.observation


@pytest.mark.parametrize("name,tool_reward", [("search_tool", 0.3), ("search_tool_no_int_reward", 0.0)])
def test_gem_search_wrappers_use_search_url(server_url, monkeypatch, name, tool_reward):
    monkeypatch.setenv("SEARCH_URL", server_url)
    monkeypatch.delenv("GEM_SEARCH_CORPUS", raising=False)
    plugin._shared_search_tool.cache_clear()
    (fn,) = get_wrapper_fns(name)
    env = fn(SumEnv())
    obs, _ = env.reset(seed=0)
    assert "<search>" in obs
    obs, reward, terminated, _, info = env.step("<search>Everest</search>")
    assert "Mount Everest" in obs and reward == 0.0 and not terminated
    assert info["tool_reward_pending"] == pytest.approx(tool_reward)  # paid with a correct answer
    assert info["tool_type"] == "search" and env.max_tool_uses == 5


def test_gem_search_wrapper_without_a_source_says_what_to_set(monkeypatch):
    monkeypatch.delenv("SEARCH_URL", raising=False)
    monkeypatch.delenv("GEM_SEARCH_CORPUS", raising=False)
    plugin._shared_search_tool.cache_clear()
    (fn,) = get_wrapper_fns("search_tool")
    env = fn(SumEnv())  # builds, as the reference's does; the first search says what to set
    env.reset(seed=0)
    with pytest.raises(ValueError, match="SEARCH_URL"):
        env.step("<search>x</search>")


class _ReferenceQuery(msgspec.Struct):
    """The request the reference's retrieval server validates (its ``QueryRequest``)."""

    query: str
    topk: int | None = None
    return_scores: bool = False


class _BatchQuery(msgspec.Struct):
    """Search-R1's request: a batch of queries."""

    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


def _stand_in(request_type: type):
    """A retrieval server on 127.0.0.1 that accepts exactly one request shape (msgpack),
    anything else HTTP 422; yields its URL and the requests it accepted."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    index = BM25Index(PASSAGES)
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            try:
                request = msgspec.msgpack.decode(body, type=request_type)
            except msgspec.DecodeError:
                self.send_response(422)
                self.end_headers()
                return
            seen.append(msgspec.msgpack.decode(body))
            queries = request.queries if request_type is _BatchQuery else [request.query]
            rows = [
                [{"document": h.document, "score": h.score if request.return_scores else None} for h in hits]
                for hits in index.batch_search(queries, request.topk or 10)
            ]
            payload = msgspec.msgpack.encode({"result": rows if request_type is _BatchQuery else rows[0]})
            self.send_response(200)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/retrieve", seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def reference_server_url():
    """A stand-in for the reference package's retrieval server (a GPU/faiss mosec app that
    cannot run here), speaking exactly its wire format: a msgpack ``{"query", "topk",
    "return_scores"}`` body, anything else HTTP 422; the reply is msgpack ``{"result":
    [{"document": {...}, "score": ...}, ...]}`` for that one query."""
    yield from _stand_in(_ReferenceQuery)


@pytest.fixture
def batch_server_url():
    """A server that only knows Search-R1's ``{"queries": [...]}`` (422 otherwise)."""
    yield from _stand_in(_BatchQuery)


async def test_search_tool_speaks_the_reference_servers_format(reference_server_url):
    url, seen = reference_server_url
    tool = SearchTool(1, url, 2, 5)  # the reference's positional signature
    assert (tool.topk, tool.timeout) == (2, 5)
    result = tool.execute_action("<search>highest mountain</search>")
    assert result.success and result.observation.startswith("\n\n<information>Doc 1(Title: Mount Everest)")
    assert seen[-1] == {"query": "highest mountain", "topk": 2, "return_scores": True}
    result = await tool.aexecute_action("<search>natural satellite</search>")
    assert result.success and "Title: Moon" in result.observation
    rows = RetrievalClient(url).batch_search(["Tiber", "France"], topk=1)
    assert [r[0].document["title"] for r in rows] == ["Rome", "Paris"]


def test_search_tool_reads_search_url_like_the_reference(reference_server_url, monkeypatch):
    url, _ = reference_server_url
    monkeypatch.setenv("SEARCH_URL", url)
    assert SearchTool(topk=1).execute_action("<search>Python language</search>").success


@pytest.mark.parametrize("protocol", ["auto", "batch"])
def test_our_server_accepts_both_request_shapes(server_url, protocol):
    client = RetrievalClient(server_url, protocol=protocol)
    assert [r[0].document["title"] for r in client.batch_search(["Moon", "Tiber"], topk=1)] == ["Moon", "Rome"]
    single = msgspec.msgpack.encode({"query": "Everest", "topk": 1, "return_scores": True})
    import httpx

    (item,) = msgspec.msgpack.decode(httpx.post(server_url, content=single).content)["result"]
    assert item["document"]["title"] == "Mount Everest"


def test_the_batch_shape_is_refused_by_the_reference_server(reference_server_url):
    # what our client used to send: the reference's server answers 422
    url, seen = reference_server_url
    client = RetrievalClient(url, protocol="batch")
    import httpx

    with pytest.raises(httpx.HTTPStatusError):
        client.search("Moon")
    assert seen == []  # the reference server refused the batch shape


def test_auto_falls_back_to_the_batch_shape(batch_server_url):
    url, seen = batch_server_url
    client = RetrievalClient(url)
    assert client.search("capital of France", topk=1)[0].document["title"] == "Paris"
    assert client.protocol == "batch" and seen[-1]["queries"] == ["capital of France"]
    assert [r[0].document["title"] for r in client.batch_search(["Moon", "Tiber"], topk=1)] == ["Moon", "Rome"]
