"""gem-integrations' plugin (entry point ``gem = integrations``): the ``gem serve`` command,
the ``vf:`` id family and the reference-style ``gem.integrations.<module>`` paths.

Registering imports no framework: each is imported when its command runs or its env is made.
"""

from __future__ import annotations

import sys
from typing import Any

from gem import hookimpl

#: the modules of this package that scripts written against gem-core's old layout import as
#: ``gem.integrations.<name>``, each with the top-level packages of its framework -> the extra that brings them
MODULES: dict[str, dict[str, str]] = {
    "_support": {},
    "gymnasium": {"gymnasium": "gem-integrations[gymnasium]"},
    "openenv_server": {"openenv": "gem-integrations[serve]"},
    "openrlhf": {"openrlhf": "gem-integrations[openrlhf]"},
    "skyrl": {"skyrl_gym": "gem-integrations[skyrl]"},
    "tinker": {"tinker_cookbook": "gem-integrations[tinker]", "chz": "gem-integrations[tinker]"},
    "trl": {"trl": "gem-integrations[trl]"},
    "verifiers": {"verifiers": "gem-integrations[verifiers]"},
    "turns": {},
    "verl": {"verl": "gem-integrations[verl]"},
}


@hookimpl
def gem_register_envs(registry: Any) -> None:
    # ``vf:<taskset>``: a Prime Intellect verifiers environment, loaded by verifiers' own loader
    # (extra gem-integrations[verifiers]); nothing is imported until one is made
    registry.register_family("vf", "gem_integrations.verifiers:VerifiersEnv", "taskset")


@hookimpl
def gem_register_commands(cli: Any) -> None:
    cli.register("serve", serve, help="serve an env as an OpenEnv-compatible server (extra gem-integrations[serve])")


@hookimpl
def gem_register_compat(registry: Any) -> None:
    # one row per module, not one for the package: a package alias would let Python find the
    # submodules through gem_integrations' own folder and load each a second time under the old name
    for name, needs in MODULES.items():
        registry.register(f"gem.integrations.{name}", f"gem_integrations.{name}", needs=needs)


@hookimpl
def gem_register_provides(registry: Any) -> None:
    # what this package provides, and the extra each part needs (gem.provides)
    registry.suite("vf", extra="verifiers")
    registry.command("serve")
    registry.reference_path("gem.integrations")


def serve(argv: list[str]) -> int:
    """``gem serve``: without OpenEnv, one line saying how to install it (``--help`` too, since
    the options are of no use until the extra is installed)."""
    try:
        from gem_integrations.openenv_server import main
    except ImportError as exc:
        if exc.name != "openenv":
            raise
        print(exc, file=sys.stderr)
        return 1
    return main(argv)
