"""The evaluation's JSONL file: one line per finished episode, read back to resume.

An episode is identified by ``(env_id, episode, sample)``: episode ``i`` of an env
resets with seed ``seed + i`` and is played ``samples`` times. Lines are appended and
flushed as episodes end, so a killed run loses only the episodes in flight; a line cut
short by the kill is dropped when the file is opened again. When a key appears twice
(an episode re-run after an endpoint failure) the later line wins.

>>> store = EpisodeStore("gem-eval/my-model/episodes.jsonl")   # doctest: +SKIP
>>> finished = store.load()                                    # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


@dataclass(frozen=True, order=True)
class EpisodeKey:
    env_id: str
    episode: int
    sample: int

    @classmethod
    def of(cls, record: dict[str, Any]) -> EpisodeKey:
        return cls(str(record["env_id"]), int(record["episode"]), int(record["sample"]))


def needs_rerun(record: dict[str, Any]) -> bool:
    """Episodes lost to the endpoint (after all retries) are played again on resume;
    finished ones, and those whose request itself was refused, are kept."""
    return record.get("error_kind") == "endpoint"


class EpisodeStore:
    """Appends episode records to ``path`` and reads them back."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] | None = None

    def load(self) -> dict[EpisodeKey, dict[str, Any]]:
        """Every intact record, the last one per key; repairs a line a kill cut short."""
        if not self.path.exists():
            return {}
        raw = self.path.read_text(encoding="utf-8")
        records: dict[EpisodeKey, dict[str, Any]] = {}
        kept: list[str] = []
        for line in raw.splitlines():
            try:
                record = json.loads(line)
                key = EpisodeKey.of(record)
            except (ValueError, KeyError, TypeError):
                continue
            records[key] = record
            kept.append(line)
        if raw and (not raw.endswith("\n") or len(kept) != len(raw.splitlines())):
            self._rewrite(kept)
        return records

    def _rewrite(self, lines: list[str]) -> None:
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(tmp, self.path)

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as a line and flush it to the OS (survives the process being killed)."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
