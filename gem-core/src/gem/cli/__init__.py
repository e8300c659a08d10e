"""The ``gem`` command line: ``gem list``, ``gem info``, ``gem plugins``, ``gem play``,
and the subcommands plugins add (``gem train``, ``gem eval``, ...)."""

from __future__ import annotations

import os
import sys

from gem._version import __version__
from gem.errors import GemError, did_you_mean, distribution_installed, install_hint


def _usage(commands: dict[str, str]) -> str:
    width = max(len(n) for n in commands)
    lines = ["usage: gem COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in sorted(commands.items())]
    lines += ["", "`gem COMMAND --help` shows a command's options."]
    return "\n".join(lines)


def _not_loaded(distribution: str) -> str:
    """Why an installed distribution's plugin registered nothing, as ``gem plugins`` records it."""
    from gem.plugins import catalog

    def norm(name: str) -> str:
        return name.lower().replace("_", "-")

    info = next((p for p in catalog().plugins if norm(p.distribution) == norm(distribution)), None)
    if info is None or info.status == "ok":
        return "its plugin registered no such command"
    if info.status == "disabled":
        return "GEM_DISABLE_PLUGIN_AUTOLOAD is set"
    if info.status == "blocked":
        return "GEM_PLUGINS or GEM_BLOCKED_PLUGINS leave its plugin out"
    return f"its plugin failed to load: {info.error}"


def _provider_hint(name: str) -> str | None:
    """One line for a command that a package not loaded here provides (the installed suites' word, then the
    fallback table); None if none does."""
    from gem.plugins import catalog

    package = catalog().provides.command_package(name)
    if package is None:
        return None
    if not distribution_installed(package):
        return f"gem {name} is provided by {package}; install it {install_hint(package)}"
    return f"gem {name} is provided by {package}, which is installed but not loaded ({_not_loaded(package)})"


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
        print(f"gem-core {__version__}")
        return 0
    name = argv[0]
    if name not in registry:
        hint = _provider_hint(name)
        if hint is not None:
            print(f"gem: {hint}", file=sys.stderr)
            return 2
        close = did_you_mean(name, list(helps) + [c for c in catalog().provides.commands() if c not in helps])
        print(f"gem: unknown command {name!r}.{close}\n\n{_usage(helps)}", file=sys.stderr)
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
