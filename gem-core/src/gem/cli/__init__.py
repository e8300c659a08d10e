"""The ``gem`` command line: ``gem list``, ``gem info``, ``gem plugins``, ``gem play``,
and the subcommands plugins add (``gem train``, ``gem eval``, ...)."""

from __future__ import annotations

import os
import sys

from gem.errors import GemError, did_you_mean


def _usage(commands: dict[str, str]) -> str:
    width = max(len(n) for n in commands)
    lines = ["usage: gem COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in sorted(commands.items())]
    lines += ["", "`gem COMMAND --help` shows a command's options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``gem`` console script."""
    from gem.plugins import catalog

    argv = list(sys.argv[1:] if argv is None else argv)
    registry = catalog().commands
    helps = {name: registry.get(name).meta.get("help", "") for name in registry.names()}
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage(helps))
        return 0
    if argv[0] in ("-V", "--version"):
        from gem import __version__

        print(f"gem-core {__version__}")
        return 0
    name = argv[0]
    if name not in registry:
        print(f"gem: unknown command {name!r}.{did_you_mean(name, list(helps))}\n\n{_usage(helps)}", file=sys.stderr)
        return 2
    try:
        status = int(registry.get(name).factory(argv[1:]) or 0)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return status
    except BrokenPipeError:
        # the reader went away (``gem list | head -2``): stop quietly, as a Unix tool does.
        # stdout is pointed at /dev/null so the interpreter's final flush does not fail too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what the shell reports for such a tool
    except GemError as exc:
        print(f"gem {name}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
