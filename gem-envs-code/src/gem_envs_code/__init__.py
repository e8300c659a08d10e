"""GEM code envs: programs checked by real tests in gem-tools' sandbox.

>>> import gem
>>> env = gem.make("eval:HumanEval")                    # doctest: +SKIP
>>> obs, info = env.reset()                             # doctest: +SKIP

Kept import-light (the plugin imports this package): the public names below load
their modules on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CodeEnv": "gem_envs_code.env",
    "extract_code": "gem_envs_code.extract",
    "Problem": "gem_envs_code.problems",
    "IOTest": "gem_envs_code.problems",
    "AssertTest": "gem_envs_code.problems",
    "TestRunner": "gem_envs_code.runner",
    "RunReport": "gem_envs_code.runner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'gem_envs_code' has no attribute {name!r}")
