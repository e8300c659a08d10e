"""gem-core's own subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def cmd_data(argv: list[str]) -> int:
    from gem.data.command import main

    return main(argv)


def cmd_replay(argv: list[str]) -> int:
    from gem.replay import main

    return main(argv)


def cmd_audit(argv: list[str]) -> int:
    from gem.audit.command import main

    return main(argv)


def cmd_list(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gem list", description="List registered env ids.")
    parser.add_argument("pattern", nargs="?", help="glob (game:*-easy) or substring (wordle)")
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    args = parser.parse_args(argv)
    from gem.plugins import catalog
    from gem.registration import list_envs, print_envs

    if args.json:
        print(json.dumps(list_envs(args.pattern)))
        return 0
    print_envs(args.pattern)
    failed = [p for p in catalog().plugins if p.status == "error"]
    if failed:
        names = ", ".join(p.name for p in failed)
        print(f"\n{len(failed)} plugin(s) failed to load ({names}); see `gem plugins`.", file=sys.stderr)
    return 0


def cmd_info(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gem info", description="Show an env's spec and first observation.")
    parser.add_argument("env_id")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from gem.registration import make, spec

    s = spec(args.env_id)
    print(f"id:           {s.id}")
    print(f"entry point:  {s.entry_point_name()}")
    print(f"provided by:  {s.source}")
    if s.description:
        print(f"description:  {s.description}")
    print("defaults:" if s.kwargs else "defaults:     (none)")
    for key, value in sorted(s.kwargs.items()):
        print(f"  {key} = {_shown(value)}")
    env = make(args.env_id)
    try:
        obs, info = env.reset(seed=args.seed)
        print(f"\nfirst observation (seed {args.seed}):\n" + _indent(obs if isinstance(obs, str) else json.dumps(obs)))
        if info.get("suffix"):
            print('\ninfo["suffix"] (a history wrapper adds it below the observation):\n' + _indent(info["suffix"]))
        try:
            print(f"\na random action: {_shown(env.sample_random_action())}")
        except NotImplementedError:
            pass
    finally:
        env.close()
    return 0


def cmd_plugins(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gem plugins", description="Show plugins and their load status.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from gem.plugins import catalog

    plugins = catalog().plugins
    if args.json:
        print(json.dumps([p.__dict__ for p in plugins], indent=2))
        return 0
    print(f"{'plugin':<12} {'distribution':<22} {'version':<9} {'status':<9} registered")
    for p in plugins:
        counts = ", ".join(f"{n} {k}" for k, n in p.counts.items() if n) or "-"
        print(f"{p.name:<12} {p.distribution:<22} {p.version:<9} {p.status:<9} {counts}")
        if p.error:
            print(f"    error: {p.error}")
    return 0


def cmd_play(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gem play",
        description="Play an env in the terminal: read the observation, type an action. "
        "Type :random for a random action, :quit to stop.",
    )
    parser.add_argument("env_id")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--box", choices=("auto", "always", "never"), default="auto",
                        help="put a typed move inside \\boxed{} (auto: when the env asks for \\boxed{} answers "
                        "and the move has none)")
    args = parser.parse_args(argv)
    from gem.registration import make

    env = make(args.env_id)
    _enable_line_editing()
    try:
        for episode in range(args.episodes):
            seed = None if args.seed is None else args.seed + episode
            obs, info = env.reset(seed=seed)
            print(f"=== {args.env_id}  episode {episode + 1}" + (f"  seed {seed}" if seed is not None else "") + " ===")
            _show(obs, info)
            box = args.box == "always" or (args.box == "auto" and "\\boxed" in str(obs))
            if box and args.box == "auto":
                print("\n(type just your move: it is sent as \\boxed{move}; --box never turns this off)")
            total, turn = 0.0, 0
            while True:
                try:
                    action = input(f"\n[turn {turn + 1}] action> ")
                except EOFError:
                    print()
                    return 0
                if not action.strip():  # an empty line is a slip of the Enter key, not a move
                    print("(type a move, :random for a random one, or :quit)")
                    continue
                if action.strip() == ":quit":
                    return 0
                if action.strip() == ":random":
                    action = env.sample_random_action()
                    print(f"(random action: {action})")
                elif box and "\\boxed{" not in action:
                    action = f"\\boxed{{{action.strip()}}}"
                obs, reward, terminated, truncated, info = env.step(action)
                turn += 1
                total += float(reward)
                _show(obs, info)
                print(f"-- reward {float(reward):+.3f}   return {total:+.3f}")
                if terminated or truncated:
                    turns = f"{turn} turn" + ("" if turn == 1 else "s")
                    print(f"=== episode over ({'terminated' if terminated else 'truncated'}) after {turns}, "
                          f"return {total:+.3f} ===")
                    break
    except KeyboardInterrupt:
        # Ctrl-C ends the game: leave the prompt's line and say so, as a shell would
        print("\nbye")
        return 130
    finally:
        env.close()
    return 0


def _enable_line_editing() -> None:
    """Arrow keys, history and Ctrl-A/E in ``input()``: importing readline is enough."""
    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401
        except ImportError:  # not on every platform (Windows)
            pass


def _shown(value: Any) -> str:
    """A value for people to read: a string in quotes as written (``'\\boxed{5}'`` shows one
    backslash, as the env reads it), anything else as a Python literal."""
    return f"'{value}'" if isinstance(value, str) else repr(value)


def _show(obs: Any, info: dict[str, Any]) -> None:
    # what a history wrapper shows the agent: the observation, then the env's suffix (a game's board)
    print(obs)
    if info.get("suffix"):
        print(info["suffix"])


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
