"""Registers ``gem eval`` with gem's CLI (entry point ``gem = evals``) and the old ``gem.eval``
module paths with gem-core's compat table; imports nothing heavy."""

from __future__ import annotations

from typing import Any

import gem

#: the modules that were ``gem.eval.<name>`` when the toolkit lived in gem-core
MODULES = ("cli", "evaluation", "local_engines", "metrics", "models", "openai_client", "policy", "progress",
           "records", "testing_server")


def run_eval(argv: list[str]) -> int:
    """``gem eval ENV_IDS --model MODEL [options]``."""
    from gem_evals.cli import main

    return main(argv)


@gem.hookimpl
def gem_register_commands(cli: Any) -> None:
    cli.register("eval", run_eval, help="evaluate a model (endpoint, vLLM or HF path) on envs")


@gem.hookimpl
def gem_register_compat(registry: Any) -> None:
    # `from gem.eval.models import ...` and `python -m gem.eval.testing_server` keep working
    registry.register("gem.eval", "gem_evals")
    for name in MODULES:
        registry.register(f"gem.eval.{name}", f"gem_evals.{name}")


@gem.hookimpl
def gem_register_provides(registry: Any) -> None:
    # what this package provides (gem.provides)
    registry.command("eval")
    registry.reference_path("gem.eval")
