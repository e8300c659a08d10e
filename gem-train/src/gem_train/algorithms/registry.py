"""The one registry of algorithms: ``algo.name`` -> its class, found in this package's modules.

Config validation (:func:`gem_train.config.validate`) and the trainer (:func:`make_algorithm`) both read
:data:`ALGORITHMS`; adding an algorithm is a module here with an :class:`~.base.Algorithm` subclass that sets
``name`` (and ``grouped``/``discounts`` where they differ), plus its YAML under ``conf/algo/``.

>>> sorted(ALGORITHMS)
['grpo', 'ppo', 'rebn', 'reinforce', 'rloo']
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from gem_train.algorithms.base import Algorithm


def _discover() -> dict[str, type[Algorithm]]:
    package = importlib.import_module("gem_train.algorithms")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"gem_train.algorithms.{module.name}")
    found: dict[str, type[Algorithm]] = {}
    todo = list(Algorithm.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.name is None:
            continue
        if cls.name in found and found[cls.name] is not cls:
            raise TypeError(f"algo.name {cls.name!r} is taken by both {found[cls.name].__qualname__} and "
                            f"{cls.__qualname__}")
        found[cls.name] = cls
    return dict(sorted(found.items()))


#: algo.name -> its class
ALGORITHMS: dict[str, type[Algorithm]] = _discover()


def make_algorithm(cfg: Any, **context: Any) -> Algorithm:
    """The object of ``cfg.name``, built with ``context`` (PPO's: policy, checkpoint, encode, max_model_len);
    an algorithm takes what it needs of it."""
    if cfg.name not in ALGORITHMS:
        raise ValueError(f"unknown algo.name {cfg.name!r}: one of {', '.join(ALGORITHMS)}")
    return ALGORITHMS[cfg.name](cfg, **context)
