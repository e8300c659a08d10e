"""``gem audit ID... [--episodes N] [--seed S] [--json FILE]``."""

from __future__ import annotations

import argparse
import json
import sys

from gem.audit.play import audit_env
from gem.audit.report import table

DEFAULT_EPISODES = 32


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gem audit",
        description="Play generic reward-hack strategies against each env on the same seeds as an honest "
                    "baseline; flag a strategy whose paired gain exceeds a one-sided t bound (Bonferroni over "
                    "the strategies). Exit 1 when any strategy is flagged.")
    parser.add_argument("ids", nargs="+", metavar="ID", help="registered env ids")
    parser.add_argument("--episodes", type=int, default=DEFAULT_EPISODES, help="episodes per strategy (>= 2)")
    parser.add_argument("--seed", type=int, default=0, help="first reset seed")
    parser.add_argument("--confidence", type=float, default=0.99, help="familywise confidence per env")
    parser.add_argument("--step-timeout", type=float, default=10.0, help="seconds an env call may take")
    parser.add_argument("--jobs", type=int, default=1,
                        help="strategies played at once on separate env instances, in threads (for envs whose "
                             "steps wait on a sandbox and are safe to step from several threads); same figures")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    parser.add_argument("--allow", action="append", default=[], metavar="ID/STRATEGY",
                        help="a finding documented as the env's intended behaviour: still shown, does not fail")
    args = parser.parse_args(argv)
    if args.episodes < 2:
        parser.error("--episodes must be at least 2")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if not 0 < args.confidence < 1:
        parser.error("--confidence must lie between 0 and 1")
    results, status = [], 0
    for env_id in args.ids:
        result = audit_env(env_id, args.episodes, args.seed, args.step_timeout, 1 - args.confidence,
                           jobs=args.jobs)
        results.append(result)
        print(table(result), flush=True)
        if result.flagged:
            names = ", ".join(s.name + (" (severe)" if s.severe else "") for s in result.flagged)
            print(f"  -> {env_id}: flagged {names}", flush=True)
            unexplained = [s.name for s in result.flagged if f"{env_id}/{s.name}" not in args.allow]
            if unexplained:
                status = max(status, 1)
            else:
                print(f"  (documented as intended: --allow {' '.join(args.allow)})", flush=True)
        if result.setup_error:
            status = max(status, 2)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"confidence": args.confidence, "envs": [r.to_json() for r in results]}, out, indent=1)
    flagged = sum(1 for r in results if r.flagged)
    print(f"\n{flagged} of {len(results)} env(s) flagged at {args.confidence:.0%} confidence", file=sys.stderr)
    return status
