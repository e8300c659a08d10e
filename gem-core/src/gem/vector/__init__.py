"""Vector envs: many envs stepped together, on one of several backends."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from gem.core import Env
from gem.vector.base import VectorEnv
from gem.vector.local import SyncVectorEnv, ThreadVectorEnv
from gem.vector.process import ProcessVectorEnv
from gem.vector.slot import AutoresetMode

#: backend name -> class, or ``"module:Class"`` for one that needs an optional dependency
#: (imported when chosen, so ``import gem`` never imports Ray)
BACKENDS: dict[str, type[VectorEnv] | str] = {
    "sync": SyncVectorEnv,
    "thread": ThreadVectorEnv,
    "process": ProcessVectorEnv,
    "ray": "gem.vector.ray:RayVectorEnv",
}

#: the reference package's name for the thread backend
AsyncVectorEnv = ThreadVectorEnv


def make_vector_env(backend: str, env_fns: Sequence[Callable[[], Env]], **kwargs: Any) -> VectorEnv:
    """Build a vector env of the named backend."""
    try:
        cls = BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown vector backend {backend!r}; choose one of {', '.join(BACKENDS)}") from None
    if isinstance(cls, str):
        module, _, name = cls.partition(":")
        cls = getattr(importlib.import_module(module), name)
    return cls(env_fns, **kwargs)


__all__ = [
    "BACKENDS",
    "AsyncVectorEnv",
    "AutoresetMode",
    "ProcessVectorEnv",
    "SyncVectorEnv",
    "ThreadVectorEnv",
    "VectorEnv",
    "make_vector_env",
]
