"""Registers the ``terminal:`` ids with gem-core (entry point ``gem = terminal``)."""

from __future__ import annotations

import gem

ENTRY = "gem_envs_terminal.env:TerminalEnv"


@gem.hookimpl
def gem_register_envs(registry):
    registry.register("terminal:Shell-v0", ENTRY)
    for category in ("files", "text", "debug"):
        registry.register(f"terminal:Shell-v0-{category}", ENTRY, categories=[category])


@gem.hookimpl
def gem_register_provides(registry):
    # what this suite provides (gem.provides)
    registry.suite("terminal")
