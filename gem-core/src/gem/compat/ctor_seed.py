"""The reference package's ``seed=`` constructor argument, taken by every env class.

Reference code builds envs as ``gem.make(id, seed=N)``, ``make_vec(..., vec_kwargs=[{"seed": N}])``
or ``SomeEnv(..., seed=N)``. Our envs are seeded by ``reset(seed=...)`` instead, so an env's own
``__init__`` need not name ``seed``: :func:`construct` (set as :data:`gem.extend.points.env_call`,
which the metaclass of :class:`gem.Env` calls) takes it off the call, builds the env without it,
then seeds the env's RNG stream (so the first ``reset()`` and every one after it are determined) and
keeps the value as ``env.seed``, where the reference's envs keep theirs; :func:`signature` (set as
``env_signature``) shows it in ``inspect.signature(EnvClass)``. A class whose ``__init__`` names
``seed`` gets it as written; wrappers (``_takes_ctor_seed = False``) pass it on. Nothing is
rewritten: the subclass's ``__init__`` is the one its author wrote.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any


@functools.cache
def _init_names_seed(cls: type) -> bool:
    try:
        return "seed" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):  # no signature to read: pass the call on as written
        return True


def construct(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], build: Callable[..., Any]) -> Any:
    """``EnvClass(*args, **kwargs)``, taking the reference's ``seed=`` for a class that does not name it."""
    if "seed" not in kwargs or not getattr(cls, "_takes_ctor_seed", False) or _init_names_seed(cls):
        return build(*args, **kwargs)
    kwargs = dict(kwargs)
    seed = kwargs.pop("seed")
    env = build(*args, **kwargs)
    # spawn() builds a sibling from the arguments the env was made with, seed included
    env._init_args = (args, {**kwargs, "seed": seed})
    if seed is not None:
        env._seed(seed)
        env.seed = seed
    return env


def signature(cls: type, signature: inspect.Signature) -> inspect.Signature:
    """What the class takes (its ``__init__``'s parameters without ``self``), and ``seed`` for reference code."""
    params = list(signature.parameters.values())
    if getattr(cls, "_takes_ctor_seed", False) and "seed" not in signature.parameters:
        seed = inspect.Parameter("seed", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="int | None")
        at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
        params.insert(at, seed)
    return signature.replace(parameters=params)
