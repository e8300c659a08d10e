"""``gem replay FILE``: step every recorded episode again from its seed with its recorded actions, and say which
reproduce their recorded rewards exactly.

A record is one JSON line with ``env_id``, ``seed``, ``actions`` and ``rewards`` (one per turn), as ``gem eval``
writes them (``episodes.jsonl``) and gem-train writes its evaluation episodes; ``episode``, ``sample``,
``fingerprint``, ``error``, ``terminated`` and ``truncated`` are used when present. How the env was built
(``env_kwargs``, ``wrappers``) comes from the record, else from the ``run.json`` beside the file (``gem eval``
keeps its settings there). An episode reproduces when every turn's reward equals the recorded one and the env
ends exactly where the record did. Episodes that ended in an error (a timeout, a lost endpoint) are skipped: their
last turn never happened.

It is how a user checks a published result on their machine, and how a maintainer shows that a change left an
env's rewards alone:

    gem replay gem-eval/my-model/episodes.jsonl        # exit 1 when any episode differs
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gem.errors import GemError

#: differing episodes listed per env
SHOWN = 3


@dataclass
class EnvReport:
    """What replaying one env's episodes found."""

    env_id: str
    reproduced: int = 0
    skipped: int = 0
    differ: list[str] = field(default_factory=list)
    fingerprints: set[tuple[str | None, str | None]] = field(default_factory=set)
    # wrappers left out (they need the model's tokenizer and shape observations only)
    without: set[str] = field(default_factory=set)

    @property
    def replayed(self) -> int:
        return self.reproduced + len(self.differ)

    def line(self) -> str:
        text = f"{self.env_id}: {self.reproduced}/{self.replayed} episodes reproduce their rewards"
        if self.skipped:
            text += f" ({self.skipped} skipped: they ended in an error)"
        changed = sorted({f"{old} recorded, {new} now" for old, new in self.fingerprints if old and old != new})
        if changed:
            text += f"; the env's fingerprint changed ({'; '.join(changed)})"
        elif any(old for old, _ in self.fingerprints):
            text += "; fingerprint as recorded"
        if self.without:
            text += (f"; replayed without {', '.join(sorted(self.without))} (it shapes observations only; the "
                     "fingerprint is not compared)")
        for reason in self.differ[:SHOWN]:
            text += f"\n  differs: {reason}"
        if len(self.differ) > SHOWN:
            text += f"\n  ... and {len(self.differ) - SHOWN} more"
        return text


def read_records(path: Path) -> list[dict[str, Any]]:
    """The file's episode records (a line that is not one, such as a line cut short by a kill, is left out)."""
    if not path.is_file():
        raise GemError(f"no such file: {path}")
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and {"env_id", "seed", "actions", "rewards"} <= set(record):
            records.append(record)
    if not records:
        raise GemError(f"{path} holds no episode records (lines with env_id, seed, actions and rewards)")
    return records


def _settings(path: Path) -> dict[str, Any]:
    run = path.parent / "run.json"
    if run.is_file():
        try:
            return dict(json.loads(run.read_text()))
        except ValueError:
            return {}
    return {}


def _build(env_id: str, env_kwargs: dict[str, Any], wrappers: Any, entry_point: str | None = None
           ) -> tuple[Any, list[str]]:
    """The env as the record's run built it. A wrapper that needs the model's tokenizer (``concat_chat``) renders
    observations only, so it is left out; an id the run registered itself (gem-train's ``env.entry_point``) is
    registered again. Returns the env and the wrappers left out."""
    from gem.registration import list_envs, make, register
    from gem.wrappers import apply_wrappers, needs_tokenizer

    names = [w.strip() for w in wrappers.split(",")] if isinstance(wrappers, str) else list(wrappers or [])
    dropped = [n for n in names if n and needs_tokenizer(n)]
    if entry_point and env_id not in list_envs():
        register(env_id, entry_point)
    return apply_wrappers(make(env_id, **env_kwargs), [n for n in names if n and n not in dropped]), dropped


def replay_episode(env: Any, record: dict[str, Any]) -> str | None:
    """Step ``env`` through ``record``; None when it reproduces, else what differs (one line)."""
    where = f"episode {record.get('episode', '?')} sample {record.get('sample', 0)} (seed {record['seed']})"
    recorded = [float(r) for r in record["rewards"]]
    env.reset(seed=record["seed"])
    done = False
    for turn, (action, reward) in enumerate(zip(record["actions"], recorded)):
        if done:
            return f"{where}: the env ended after turn {turn}, the record goes on to turn {len(recorded)}"
        _, now, terminated, truncated, _ = env.step(action)
        if float(now) != reward:
            return f"{where}: turn {turn + 1} reward {reward!r} recorded, {float(now)!r} now"
        done = bool(terminated or truncated)
    if record.get("terminated") and not done:
        return f"{where}: the record ended (terminated) after turn {len(recorded)}; the env goes on"
    return None


def replay(records: Iterable[dict[str, Any]], settings: dict[str, Any] | None = None) -> list[EnvReport]:
    """Replay ``records`` (see the module); ``settings``: ``env_kwargs``/``wrappers`` for records without
    their own. Returns one report per env id, in first-seen order."""
    from gem.fingerprint import safe_fingerprint

    settings = settings or {}
    reports: dict[str, EnvReport] = {}
    envs: dict[tuple[str, str], tuple[Any, list[str]]] = {}
    try:
        for record in records:
            env_id = str(record["env_id"])
            report = reports.setdefault(env_id, EnvReport(env_id))
            if record.get("error"):
                report.skipped += 1
                continue
            env_kwargs = record.get("env_kwargs", settings.get("env_kwargs")) or {}
            wrappers = record.get("wrappers", settings.get("wrappers"))
            key = (env_id, json.dumps([env_kwargs, wrappers], sort_keys=True, default=repr))
            if key not in envs:
                envs[key] = _build(env_id, env_kwargs, wrappers, record.get("entry_point"))
            env, dropped = envs[key]
            if dropped:  # the env is not the one recorded in its observations: its fingerprint cannot match
                report.without.update(dropped)
            else:
                report.fingerprints.add((record.get("fingerprint"), safe_fingerprint(env)))
            try:
                reason = replay_episode(env, record)
            except Exception as exc:  # an env that now raises on a recorded action does not reproduce it
                reason = (f"episode {record.get('episode', '?')} (seed {record['seed']}): the env raised "
                          f"{type(exc).__name__}: {exc}")
            if reason is None:
                report.reproduced += 1
            else:
                report.differ.append(reason)
    finally:
        for env, _ in envs.values():
            env.close()
    return list(reports.values())


def main(argv: list[str]) -> int:
    """``gem replay FILE``; exit 1 when any episode differs."""
    parser = argparse.ArgumentParser(prog="gem replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, help="a gem eval episodes.jsonl (or gem-train's eval_episodes.jsonl)")
    parser.add_argument("--env", action="append", default=None, metavar="ID",
                        help="replay only this env id's episodes (repeatable)")
    args = parser.parse_args(argv)
    records = read_records(args.file)
    if args.env:
        records = [r for r in records if r["env_id"] in args.env]
        if not records:
            raise GemError(f"{args.file} holds no episode of {', '.join(args.env)}")
    reports = replay(records, _settings(args.file))
    for report in reports:
        print(report.line())
    differ = sum(len(r.differ) for r in reports)
    total = sum(r.replayed for r in reports)
    print(f"{total - differ} of {total} episodes reproduce" + (f"; {differ} differ" if differ else ""))
    return 1 if differ else 0
