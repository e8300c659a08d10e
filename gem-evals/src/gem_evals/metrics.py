"""Scores of an evaluation: success rate with a Wilson interval, pass@k, per-env tables.

>>> round(pass_at_k(n=4, c=1, k=2), 3)
0.5
>>> [round(x, 3) for x in wilson_interval(8, 10)]
[0.49, 0.943]
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95% for the default ``z``);
    unlike the normal approximation it stays inside [0, 1] and is sensible at 0/n and n/n."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # exact at the ends (the formula gives 0 and 1 there, up to rounding)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of P(at least one of k samples succeeds) from n samples
    with c successes: ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per episode, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_ks(samples: int) -> list[int]:
    """The k reported for ``samples`` samples per episode: 1, 2, 4, ... and ``samples``."""
    ks = [1]
    while ks[-1] * 2 < samples:
        ks.append(ks[-1] * 2)
    return [*ks, samples] if samples > 1 else ks


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarize_env(env_id: str, records: list[dict[str, Any]], samples: int) -> dict[str, Any]:
    """The summary row of one env from its episode records.

    An episode that ended in an error counts as a failure (and in ``errors``): leaving
    it out would score a flaky endpoint higher than a reliable one.
    """
    n = len(records)
    successes = sum(bool(r["success"]) for r in records)
    low, high = wilson_interval(successes, n)
    per_episode: dict[int, list[bool]] = defaultdict(list)
    for r in records:
        per_episode[int(r["episode"])].append(bool(r["success"]))
    passes = {}
    for k in pass_ks(samples):
        scored = [pass_at_k(len(s), sum(s), k) for s in per_episode.values() if len(s) >= k]
        passes[f"pass@{k}"] = _mean(scored)
    tokens = [r["tokens"]["total"] for r in records]
    return {
        "env_id": env_id,
        "episodes": len(per_episode),
        "samples": samples,
        "rollouts": n,
        "successes": successes,
        "success_rate": successes / n if n else 0.0,
        "ci95": [low, high],
        **passes,
        "mean_return": _mean([float(r["return"]) for r in records]),
        "mean_turns": _mean([float(r["turns"]) for r in records]),
        "mean_tool_calls": _mean([float(r["tool_calls"]) for r in records]),
        "mean_tokens": _mean([float(t) for t in tokens]),
        "total_tokens": int(sum(tokens)),
        "errors": sum(r.get("error") is not None for r in records),
        "retries": int(sum(r.get("retries", 0) for r in records)),
    }


def summarize(records: Iterable[dict[str, Any]], env_ids: list[str], samples: int) -> list[dict[str, Any]]:
    """One summary row per env, in ``env_ids`` order."""
    by_env: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_env[r["env_id"]].append(r)
    return [summarize_env(env_id, by_env[env_id], samples) for env_id in env_ids]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The summary rows as a Markdown table (also what ``gem eval`` prints)."""
    samples = max((r["samples"] for r in rows), default=1)
    extra = [k for k in pass_ks(samples) if k > 1]
    rate = f"avg@{samples}" if samples > 1 else "success"
    head = ["env", "n", rate, "95% CI", *(f"pass@{k}" for k in extra), "return", "turns", "tool calls", "tokens",
            "errors", "retries"]
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|"
    lines = ["| " + " | ".join(head) + " |", rule]
    for r in rows:
        low, high = r["ci95"]
        cells = [r["env_id"], str(r["rollouts"]), f"{r['success_rate']:.3f}", f"[{low:.3f}, {high:.3f}]",
                 *(f"{r[f'pass@{k}']:.3f}" for k in extra), f"{r['mean_return']:.3f}", f"{r['mean_turns']:.2f}",
                 f"{r['mean_tool_calls']:.2f}", f"{r['mean_tokens']:.0f}", str(r["errors"]), str(r["retries"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
