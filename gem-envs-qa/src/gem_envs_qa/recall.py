"""Retrieval recall@k: how often a gold answer appears in the top-k passages the search
tool returns for a question. It tells whether a corpus can help on a dataset at all.

    gem qa-recall --sample 200 --out recall.json

A question counts as recalled at k when some gold alias occurs (as whole tokens, after
SQuAD normalisation) in its top-k passages; for a multi-part answer the score is the
fraction of parts found.

>>> from gem_envs_qa.corpus import shared_index
>>> from gem_envs_qa.sources import load_packaged
>>> retrieval_recall(load_packaged("squad"), shared_index(), ks=(1, 5), sample=100)  # doctest: +SKIP
{'questions': 100, 'recall@1': 0.62, 'recall@5': 0.83}
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from gem_envs_qa.metrics import contains_answer

DEFAULT_KS = (1, 3, 5, 10)


def fanoutqa_subquestions() -> list[dict[str, Any]]:
    """FanOutQA's single-hop sub-questions with scalar answers (its oracle decomposition)."""
    from gem_envs_qa.sources import fanoutqa_dev

    records = []

    def walk(node: Mapping[str, Any]) -> None:
        for child in node.get("decomposition") or ():
            answer = child.get("answer")
            if isinstance(answer, (str, int, float)) and not isinstance(answer, bool) and str(answer).strip():
                records.append({"question": child["question"], "answer": [str(answer)]})
            walk(child)

    for question in fanoutqa_dev():
        walk(question)
    return records


def retrieval_recall(
    questions: Sequence[Mapping[str, Any]],
    index: Any,
    ks: Sequence[int] = DEFAULT_KS,
    sample: int | None = 200,
    seed: int = 0,
) -> dict[str, float]:
    """Recall@k of ``index`` (anything with ``batch_search(queries, topk)``) on a sample of
    ``questions`` (``sample=None``: all of them), drawn with ``seed``."""
    chosen = list(range(len(questions)))
    if sample is not None and sample < len(chosen):
        chosen = sorted(random.Random(seed).sample(chosen, sample))
    records = [questions[i] for i in chosen]
    hits = index.batch_search([str(r["question"]) for r in records], max(ks))
    totals = dict.fromkeys(ks, 0.0)
    for record, ranked in zip(records, hits):
        texts = [h.document["contents"] for h in ranked]
        parts = record.get("answer_parts")
        for k in ks:
            top = " \n ".join(texts[:k])
            if parts:
                totals[k] += sum(contains_answer(top, part) for part in parts) / len(parts)
            else:
                totals[k] += float(contains_answer(top, record["answer"]))
    n = max(len(records), 1)
    return {"questions": len(records), **{f"recall@{k}": round(totals[k] / n, 3) for k in ks}}


def recall_table(
    sample: int | None = 200, ks: Sequence[int] = DEFAULT_KS, seed: int = 0
) -> dict[str, dict[str, float]]:
    """Recall@k of the offline corpus on every packaged dataset (and FanOutQA's sub-questions)."""
    from gem_envs_qa.corpus import shared_index
    from gem_envs_qa.sources import load_packaged

    index = shared_index()
    table = {name: retrieval_recall(load_packaged(name), index, ks, sample, seed)
             for name in ("triviaqa", "nq-open", "fanoutqa", "squad")}  # fmt: skip
    table["fanoutqa-subquestions"] = retrieval_recall(fanoutqa_subquestions(), index, ks, sample, seed)
    return table


def cli(argv: list[str]) -> int:
    """``gem qa-recall [--sample N] [--k 1,3,5,10] [--out FILE]``: recall@k of the offline corpus."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="gem qa-recall", description=cli.__doc__)
    parser.add_argument("--sample", type=int, default=200, help="questions per dataset (0: all)")
    parser.add_argument("--k", default=",".join(map(str, DEFAULT_KS)), help="comma-separated cut-offs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the table to this JSON file")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.k.split(",") if k.strip()]
    table = recall_table(args.sample or None, ks, args.seed)
    print(f"{'dataset':<24}{'n':>6}" + "".join(f"{f'R@{k}':>8}" for k in ks))
    for name, row in table.items():
        print(f"{name:<24}{row['questions']:>6}" + "".join(f"{row[f'recall@{k}']:>8.3f}" for k in ks))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(table, f, indent=2)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(cli(sys.argv[1:]))
