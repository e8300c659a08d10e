"""The reference package's module-level dicts, as live views of our registries.

- ``ENV_REGISTRY`` (``gem.envs.registration``): env id -> :class:`~gem.registry.EnvSpec`.
- ``WRAPPER_FACTORY`` and ``TOKENIZER_REQUIRED`` (``gem.wrappers.wrapper_factory``): wrapper
  name -> factory, and the names of the wrappers that need a tokenizer.
- ``env{i}_kwargs=`` of a vector env's ``reset`` (:func:`per_env_kwargs`).

Each is read from the loaded catalog on every access, so it shows what plugins and isolated
test registries hold at that moment. Our own API is the registry (:func:`gem.list_envs`,
:func:`gem.spec`, :func:`gem.wrappers.get_wrapper_fns`); these exist for reference code.

>>> from gem.envs.registration import ENV_REGISTRY            # doctest: +SKIP
>>> ENV_REGISTRY["game:GuessTheNumber-v0-easy"].kwargs["max_number"]  # doctest: +SKIP
20
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gem.plugins import catalog
from gem.registry import EnvSpec
from gem.wrappers import needs_tokenizer


class EnvRegistryView(Mapping[str, EnvSpec]):
    """The env registry read as the reference's ``ENV_REGISTRY`` dict."""

    def __getitem__(self, env_id: str) -> EnvSpec:
        found = catalog().envs.get(env_id)
        if found is None:
            raise KeyError(env_id)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(catalog().envs.ids())

    def __len__(self) -> int:
        return len(catalog().envs)

    def __contains__(self, env_id: object) -> bool:
        return env_id in catalog().envs


class WrapperFactory(Mapping[str, Callable[..., Any]]):
    """The wrapper registry read as the reference's ``WRAPPER_FACTORY`` dict:
    ``WRAPPER_FACTORY["concat_chat"](env, tokenizer=tok)``."""

    def __getitem__(self, name: str) -> Callable[..., Any]:
        registry = catalog().wrappers
        if name not in registry:
            raise KeyError(name)
        return registry.get(name).factory

    def __iter__(self) -> Iterator[str]:
        return iter(catalog().wrappers.names())

    def __len__(self) -> int:
        return len(catalog().wrappers.names())

    def tokenizer_required(self) -> list[str]:
        """Names of the wrappers that render a chat template (they need a tokenizer)."""
        return needs_tokenizer()


def per_env_kwargs(kwargs: dict[str, Any], num_envs: int) -> dict[int, dict[str, Any]]:
    """Take the reference's ``env{i}_kwargs={...}`` out of a vector ``reset``'s ``kwargs``:
    env index -> the arguments for that env only.

    >>> kwargs = {"shared": 1, "env1_kwargs": {"idx": 3}}
    >>> per_env_kwargs(kwargs, 2), kwargs
    ({1: {'idx': 3}}, {'shared': 1})
    """
    return {i: dict(kwargs.pop(f"env{i}_kwargs")) for i in range(num_envs) if f"env{i}_kwargs" in kwargs}


ENV_REGISTRY = EnvRegistryView()
WRAPPER_FACTORY = WrapperFactory()


def __getattr__(name: str) -> Any:
    if name == "TOKENIZER_REQUIRED":  # the reference's list, read from the registry
        return WRAPPER_FACTORY.tokenizer_required()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
