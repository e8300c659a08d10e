"""Metrics: one JSON line per record in ``metrics.jsonl``, and a short console line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

# key in the record -> label on the console line
CONSOLE = {
    "return": "return",
    "success": "success",
    "turns": "turns",
    "response_tokens": "resp_tok",
    "loss": "loss",
    "kl_sampler": "kl",
    "entropy": "ent",
    "eval_return": "eval_return",
    "eval_success": "eval_success",
    "sft_loss": "sft_loss",
    "rollout_s": "rollout_s",
    "update_s": "update_s",
}


class MetricsLog:
    """Appends records to ``path`` (JSONL) and prints them to ``stream`` when ``console``.

    >>> log = MetricsLog("runs/demo/metrics.jsonl")     # doctest: +SKIP
    >>> log.write("train", iteration=1, **{"return": 0.5})  # doctest: +SKIP
    """

    def __init__(self, path: str | Path, console: bool = True, stream: TextIO | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.console = console
        self.stream = stream or sys.stdout

    def write(self, kind: str, **record: Any) -> dict[str, Any]:
        record = {"kind": kind, **record}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self.console:
            parts = [f"[{kind}]"]
            if "iteration" in record:
                parts.append(f"it {record['iteration']:>3}")
            for key, label in CONSOLE.items():
                value = record.get(key)
                if isinstance(value, float):
                    parts.append(f"{label} {value:.3f}")
            print(" | ".join(parts), file=self.stream, flush=True)
        return record


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
