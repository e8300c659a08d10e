"""GEM: a gym for agentic LLMs.

>>> import gem
>>> env = gem.make("game:GuessTheNumber-v0-easy")   # doctest: +SKIP
>>> obs, info = env.reset(seed=0)                    # doctest: +SKIP
>>> obs, reward, terminated, truncated, info = env.step("\\\\boxed{5}")  # doctest: +SKIP

``import gem`` loads no suite: plugins load on first use of the registry.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# gem.compat (the reference package's paths and conventions) sets its gem.extend points when imported: the one
# place the kernel and compat meet (no kernel module imports it)
from gem import compat, errors  # noqa: F401
from gem._version import __version__
from gem.core import Env, EnvWrapper, Wrapper
from gem.hookspecs import hookimpl
from gem.registration import list_envs, make, make_vec, print_envs, register, spec

# the reference package's module paths (gem.envs.*, gem.tools.*, gem.utils.*, ...) are files of gem-core that
# call gem.compat.become_reference when imported: ``import gem`` itself installs no import hook

# envs/tools/utils: the reference's packages (from gem.compat's table), there after ``import gem`` as in it
_LAZY = {"vector", "runner", "wrappers", "testing", "plugins", "seeding", "multiagent", "envs", "tools", "utils"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return import_module(f"gem.{name}")
    raise AttributeError(f"module 'gem' has no attribute {name!r}")


__all__ = [
    "Env",
    "EnvWrapper",
    "Wrapper",
    "__version__",
    "errors",
    "hookimpl",
    "list_envs",
    "make",
    "make_vec",
    "print_envs",
    "register",
    "spec",
]
