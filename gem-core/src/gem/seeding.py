"""Per-env random streams that serialise to JSON.

Envs never touch the global ``random`` or ``numpy.random`` state: each owns a
``random.Random`` (``env.rng``) and a ``numpy.random.Generator`` (``env.np_random``),
both derived from one integer seed, so episodes are reproducible in threads and
processes alike.
"""

from __future__ import annotations

import _random
import os
import random
from typing import Any

import numpy as np


def fresh_seed() -> int:
    """An unpredictable 63-bit seed drawn from the OS (not from global RNG state)."""
    return int.from_bytes(os.urandom(8), "little") >> 1


def checked_seed(seed: object) -> int:
    """``seed`` as a plain int; TypeError for anything else (a bool included)."""
    if seed.__class__ is int:
        return seed  # type: ignore[return-value]
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}: {seed!r}")
    return int(seed)


def python_rng(seed: int) -> random.Random:
    """``random.Random(seed)`` for an int ``seed``, in the same state.

    Built around the constructor: ``Random(seed)`` runs two Python-level calls
    (``__init__``, ``seed``) that for an int only end in the C seeding done here, and
    seeded resets pay that on every episode."""
    rng = _new_random(random.Random)
    _seed_random(rng, seed)
    rng.gauss_next = None
    return rng


_new_random = random.Random.__new__
_seed_random = _random.Random.seed


def rng_to_json(rng: random.Random, np_rng: np.random.Generator) -> dict[str, Any]:
    """Snapshot both generators as plain JSON types."""
    version, internal, gauss = rng.getstate()
    return {
        "py": [version, list(internal), gauss],
        "np": _jsonable(np_rng.bit_generator.state),
    }


def rng_from_json(state: dict[str, Any]) -> tuple[random.Random, np.random.Generator]:
    """Rebuild the generators that :func:`rng_to_json` captured."""
    rng = _new_random(random.Random)  # unseeded: setstate() sets all of it
    version, internal, gauss = state["py"]
    rng.setstate((version, tuple(internal), gauss))
    np_state = state["np"]
    bit_gen = getattr(np.random, np_state["bit_generator"])()
    bit_gen.state = np_state
    return rng, np.random.Generator(bit_gen)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def np_random(seed: int | None = None) -> tuple[np.random.Generator, int]:
    """A numpy generator for ``seed`` (OS entropy if ``None``) and the entropy it was built
    from: the reference package's ``gem.utils.seeding.np_random``."""
    if seed is not None and (not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0):
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    seq = np.random.SeedSequence(None if seed is None else int(seed))
    return np.random.Generator(np.random.PCG64(seq)), int(seq.entropy)


def set_global_seed(seed: int | None = None) -> None:
    """Seed the global ``random`` and ``numpy.random`` state (the reference's ``set_seed``).

    GEM's envs never read that state (each has its own ``env.rng``); this is for scripts
    of their own that do.
    """
    random.seed(seed)
    np.random.seed(seed)
