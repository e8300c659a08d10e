"""Score a model on a GEM env through verifiers' own episode runner (what `vf-eval` runs).

    python examples/verifiers/eval_gem.py --dry-run          # gem-evals' scripted server, on CPU, offline
    python examples/verifiers/eval_gem.py --env game:GuessTheNumber-v0-easy --tasks 8 --rollouts 4 \\
        --model Qwen/Qwen3-4B --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import statistics
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="game:GuessTheNumber-v0-easy", help="GEM env id")
    p.add_argument("--tasks", type=int, default=4, help="tasks (reset seeds 0..N-1)")
    p.add_argument("--rollouts", type=int, default=2, help="rollouts per task (one group, one start)")
    p.add_argument("--model", default="bisect", help="model name the endpoint serves")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    p.add_argument("--dry-run", action="store_true",
                   help="play against gem-evals' scripted server (binary search) on 127.0.0.1 and check it wins")
    args = p.parse_args(argv)
    if not args.dry_run and not args.base_url:
        p.error("give --base-url (an OpenAI-compatible endpoint), or --dry-run")

    import asyncio

    from gem_evals.testing_server import ScriptedServer
    from gem_integrations.verifiers import REWARD, load_environment, play

    env = load_environment(args.env, num_tasks=args.tasks)
    server = ScriptedServer().start() if args.dry_run else None
    try:
        base_url = server.base_url if server else args.base_url
        episodes = asyncio.run(play(env, args.model, base_url, rollouts=args.rollouts, api_key_var=args.api_key_env))
    finally:
        if server:
            server.stop()
    returns = []
    for episode in episodes:
        trace = episode.traces[0]
        if REWARD not in trace.rewards:  # the episode failed before the env scored it: say why
            why = getattr(trace, "error", None) or getattr(episode, "error", None) or trace.info or {
                f"{owner}.{key}": value for owner, obj in (("episode", episode), ("trace", trace))
                for key, value in getattr(obj, "__dict__", {}).items() if "err" in key.lower() or key == "ok"}
            print(f"{episode.task.data.name}: no {REWARD} (ok={episode.ok}): {why}", file=sys.stderr)
            returns.append(float("nan"))
            continue
        score = trace.rewards[REWARD].score
        returns.append(score)
        print(f"{episode.task.data.name}: {REWARD}={score:+.3f} turns={trace.info.get('env_turns')} ok={episode.ok}")
    print(f"{len(episodes)} episodes, mean {REWARD} {statistics.fmean(returns):+.3f}")
    if args.dry_run and not (all(e.ok for e in episodes) and all(r == 1.0 for r in returns)):
        print("dry run: the scripted binary search should win every game", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
