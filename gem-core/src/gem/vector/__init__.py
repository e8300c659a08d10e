"""Vector envs: many envs stepped together, on one of several backends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gem.core import Env
from gem.vector.base import VectorEnv
from gem.vector.local import SyncVectorEnv, ThreadVectorEnv
from gem.vector.process import ProcessVectorEnv
from gem.vector.slot import AutoresetMode

#: backend name -> class; a ``ray`` backend adds itself here
BACKENDS: dict[str, type[VectorEnv]] = {
    "sync": SyncVectorEnv,
    "thread": ThreadVectorEnv,
    "process": ProcessVectorEnv,
}

#: the reference package's name for the thread backend
AsyncVectorEnv = ThreadVectorEnv


def make_vector_env(backend: str, env_fns: Sequence[Callable[[], Env]], **kwargs: Any) -> VectorEnv:
    """Build a vector env of the named backend."""
    try:
        cls = BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown vector backend {backend!r}; choose one of {', '.join(BACKENDS)}") from None
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
