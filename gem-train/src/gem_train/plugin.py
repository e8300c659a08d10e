"""Registers ``gem train`` with gem's CLI (entry point ``gem = train``); imports nothing heavy."""

from __future__ import annotations

import gem


def run_train(argv: list[str]) -> int:
    """``gem train [hydra overrides]``: the same app as the ``gem-train`` script."""
    from gem_train.cli import run

    return run(argv)


@gem.hookimpl
def gem_register_commands(cli):
    cli.register("train", run_train, help="train a policy with multi-turn RL (Hydra overrides: algo=grpo env=...)")


@gem.hookimpl
def gem_register_provides(registry):
    # what this distribution provides (gem.provides): the `gem train` command
    registry.command("train")
