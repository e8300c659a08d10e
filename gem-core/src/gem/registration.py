"""The functions users call: ``register``, ``make``, ``make_vec``, ``list_envs``, ..."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from gem.core import Env
from gem.plugins import catalog
from gem.registry import EnvSpec

if TYPE_CHECKING:
    from gem.vector import VectorEnv


def register(id: str, entry_point: str | Callable[..., Any], **kwargs: Any) -> EnvSpec:
    """Register an env id in the global registry (see :meth:`EnvRegistry.register`).

    >>> gem.register("mine:Coin-v0", "my_pkg.coin:Coin", p_heads=0.5)  # doctest: +SKIP
    """
    return catalog().envs.register(id, entry_point, **kwargs)


def spec(env_id: str) -> EnvSpec:
    """The :class:`EnvSpec` of a registered id."""
    return catalog().envs.spec(env_id)


def make(env_id: str, **kwargs: Any) -> Env:
    """Build the env registered as ``env_id``; ``kwargs`` override its defaults.

    An argument the env's constructor does not take, or a value its annotation (int, float,
    bool, str, optional or unions of them) rules out, raises
    :class:`~gem.errors.EnvArgumentError`, a ``TypeError`` that names the argument
    (``Did you mean 'max_turns'?``) before the env is built.

    >>> env = gem.make("game:GuessTheNumber-v0-easy")  # doctest: +SKIP
    >>> obs, info = env.reset(seed=0)                   # doctest: +SKIP
    """
    return catalog().envs.spec(env_id).make(**kwargs)


def list_envs(pattern: str | None = None) -> list[str]:
    """Registered ids, sorted; ``pattern`` is a glob (``game:*-easy``) or a substring."""
    return catalog().envs.ids(pattern)


def print_envs(pattern: str | None = None) -> None:
    """Print registered ids grouped by suite, with the distribution providing each."""
    envs = catalog().envs
    ids = envs.ids(pattern)
    if not ids:
        print("No envs registered" + (f" matching {pattern!r}" if pattern else "") + ".")
        return
    suite = None
    for env_id in ids:
        this = env_id.split(":")[0]
        if this != suite:
            suite = this
            print(f"{suite}:")
        s = envs.spec(env_id)
        print(f"  {env_id:<44} {s.source}")


def _make_wrapped(
    env_spec: EnvSpec, wrappers: Sequence[Callable[[Env], Env]] | None, kwargs: dict[str, Any]
) -> Env:
    # takes the spec, not the id, so that worker processes need no registry lookup
    env = env_spec.make(**kwargs)
    for wrapper in wrappers or ():
        env = wrapper(env)
    return env


def make_vec(
    env_ids: str | Sequence[str],
    wrappers: Sequence[Callable[[Env], Env]] | str | None = None,
    vec_kwargs: Sequence[dict[str, Any]] | None = None,
    async_mode: bool = False,
    seed: int = 0,
    backend: str | None = None,
    autoreset_mode: str = "same_step",
    *,
    num_envs: int | None = None,
    on_error: str = "raise",
    step_timeout: float | None = None,
    backend_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> VectorEnv:
    """A vector env of ``len(env_ids)`` envs (one per id), each wrapped by ``wrappers``
    (wrapper functions, or names such as ``"concat_with_action,episode_tracking"``).

    ``backend`` is ``"sync"``, ``"thread"`` (what ``async_mode=True`` selects, as in the
    reference package), ``"process"`` or ``"ray"`` (extra ``gem-core[ray]``).
    ``vec_kwargs[i]`` holds kwargs for env ``i`` only; ``kwargs`` go to every env. The
    first ``reset()`` seeds env ``i`` with ``seed + i``, unless ``vec_kwargs[i]`` gives it
    a ``seed`` of its own (the reference's way), whose stream it then keeps.
    ``on_error="reset"`` turns a sub-env's exception into a truncated step with
    ``info["error"]``. ``step_timeout`` (seconds) bounds each sub-env's reset and step: one
    that overruns is replaced by a fresh env and fails like a raising one (process and ray
    kill the hung worker; a hung thread cannot be killed and runs on in the background).
    ``backend_kwargs``
    go to the backend (``num_workers``, ``context`` for ``process``; ``max_workers`` for
    ``thread``; ``address``, ``num_actors`` for ``ray``).

    >>> envs = gem.make_vec(["game:GuessTheNumber-v0-easy"] * 8, backend="thread")  # doctest: +SKIP
    """
    from gem.vector import make_vector_env

    if isinstance(wrappers, str):  # names, as get_wrapper_fns takes them
        from gem.wrappers import get_wrapper_fns

        wrappers = get_wrapper_fns(wrappers)
    if isinstance(env_ids, str):
        env_ids = [env_ids] * (num_envs or 1)
    env_ids = list(env_ids)
    if num_envs is not None and num_envs != len(env_ids):
        raise ValueError(f"num_envs={num_envs} but {len(env_ids)} env ids were given")
    if vec_kwargs is not None and len(vec_kwargs) != len(env_ids):
        raise ValueError(f"vec_kwargs has {len(vec_kwargs)} entries for {len(env_ids)} envs")
    specs = {env_id: spec(env_id) for env_id in env_ids}  # unknown ids fail here, in the caller
    first_seeds: int | list[int | None] | None = seed
    if seed is not None and vec_kwargs is not None and any("seed" in kw for kw in vec_kwargs):
        # an env given its own constructor seed (the reference's vec_kwargs=[{"seed": ...}])
        # keeps that stream: its first reset is not reseeded with seed + i
        first_seeds = [None if "seed" in kw else seed + i for i, kw in enumerate(vec_kwargs)]
    backend = backend or ("thread" if async_mode else "sync")
    env_fns = [
        functools.partial(
            _make_wrapped, specs[env_id], list(wrappers or []), {**kwargs, **(vec_kwargs[i] if vec_kwargs else {})}
        )
        for i, env_id in enumerate(env_ids)
    ]
    return make_vector_env(
        backend, env_fns, env_ids=env_ids, seed=first_seeds, autoreset_mode=autoreset_mode, on_error=on_error,
        step_timeout=step_timeout, **(backend_kwargs or {}),
    )
