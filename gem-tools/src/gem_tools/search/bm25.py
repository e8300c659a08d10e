"""A local BM25 index over a passage corpus (``bm25s`` + PyStemmer), fully offline."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: the document as stored (with ``contents``) and its score."""

    document: dict[str, Any]
    score: float


def normalize_document(doc: Mapping[str, Any], index: int) -> dict[str, Any]:
    """GEM/Search-R1's passage shape: ``contents`` is the title line, then the text.

    Accepts ``{"contents": ...}`` or ``{"title": ..., "text": ...}`` records.
    """
    if isinstance(doc.get("contents"), str):
        contents = doc["contents"]
    elif isinstance(doc.get("text"), str):
        contents = f"{doc.get('title', '')}\n{doc['text']}"
    else:
        raise ValueError(f"document {index} has neither 'contents' nor 'text': {dict(doc)!r:.200}")
    return {**doc, "id": str(doc.get("id", index)), "contents": contents}


class BM25Index:
    """BM25 over passages, English stemming and stop words.

    >>> index = BM25Index([{"title": "Paris", "text": "Paris is the capital of France."},
    ...                    {"title": "Rome", "text": "Rome is the capital of Italy."}])
    >>> index.search("capital of Italy", topk=1)[0].document["title"]
    'Rome'
    """

    def __init__(self, documents: Iterable[Mapping[str, Any]], language: str = "english") -> None:
        import bm25s
        import Stemmer

        self.documents = [normalize_document(d, i) for i, d in enumerate(documents)]
        if not self.documents:
            raise ValueError("BM25Index needs at least one document")
        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer(language)
        self._stopwords = "en" if language == "english" else None
        tokens = bm25s.tokenize(
            [d["contents"] for d in self.documents], stopwords=self._stopwords, stemmer=self._stemmer,
            show_progress=False,
        )
        self._retriever = bm25s.BM25()
        self._retriever.index(tokens, show_progress=False)
        # PyStemmer stemmers are not thread-safe, and one index serves every env of a
        # process (thread backend, async runner)
        self._lock = threading.Lock()

    @classmethod
    def from_jsonl(cls, path: str | Path, **kwargs: Any) -> BM25Index:
        """Index a JSONL corpus (one passage per line, see :func:`normalize_document`)."""
        with open(path, encoding="utf-8") as f:
            return cls((json.loads(line) for line in f if line.strip()), **kwargs)

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str, topk: int = 3) -> list[Hit]:
        """The ``topk`` best passages for ``query`` (fewer if few match)."""
        return self.batch_search([query], topk)[0]

    def batch_search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        k = max(1, min(topk, len(self.documents)))
        with self._lock:
            tokens = self._bm25s.tokenize(queries, stopwords=self._stopwords, stemmer=self._stemmer,
                                          show_progress=False)
            ids, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        out = []
        for row_ids, row_scores in zip(ids, scores):
            out.append([Hit(self.documents[int(i)], float(s)) for i, s in zip(row_ids, row_scores) if s > 0])
        return out
