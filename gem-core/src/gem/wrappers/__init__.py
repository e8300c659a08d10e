"""Wrappers, and the lookup of wrappers by name (GEM's ``get_wrapper_fns``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gem.core import Env, Wrapper
from gem.wrappers.episode import EncapsulateWrapper, EpisodeTrackingWrapper, TimeLimit
from gem.wrappers.history import HistoryWrapper, ObservationWrapper


def get_wrapper_fns(wrappers: str | list[str] | None, tokenizer: Any = None) -> list[Callable[[Env], Env]]:
    """Resolve ``"python_tool,concat_chat"`` into wrapper functions, applied in order.

    Names come from the wrapper registry (gem-core's own and those plugins register);
    the tokenizer goes to the wrappers that need one. As in the reference package, a
    chat-template wrapper asked for without a tokenizer is returned as is: pass
    ``tokenizer=`` when applying it, or applying it raises ``ValueError``.

    >>> fns = get_wrapper_fns("concat_with_action")
    >>> env = fns[0](some_env)  # doctest: +SKIP
    """
    from gem.plugins import catalog

    if not wrappers:
        return []
    names = [w.strip() for w in wrappers.split(",")] if isinstance(wrappers, str) else list(wrappers)
    registry = catalog().wrappers
    fns = []
    for name in names:
        if not name:
            continue
        entry = registry.get(name)
        factory = entry.factory
        if entry.meta.get("requires_tokenizer") and tokenizer is not None:
            factory = functools.partial(factory, tokenizer=tokenizer)
        fns.append(factory)
    return fns


class WrapperFactory(Mapping[str, Callable[..., Env]]):
    """The wrapper registry read as the reference's ``WRAPPER_FACTORY`` dict:
    ``WRAPPER_FACTORY["concat_chat"](env, tokenizer=tok)``.

    Live: it shows what the registry holds when read, plugins' wrappers included.
    """

    def _entries(self) -> Any:
        from gem.plugins import catalog

        return catalog().wrappers

    def __getitem__(self, name: str) -> Callable[..., Env]:
        registry = self._entries()
        if name not in registry:
            raise KeyError(name)
        return registry.get(name).factory

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries().names())

    def __len__(self) -> int:
        return len(self._entries().names())

    def tokenizer_required(self) -> list[str]:
        """Names of the wrappers that render a chat template (they need a tokenizer)."""
        registry = self._entries()
        return [n for n in registry.names() if registry.get(n).meta.get("requires_tokenizer")]


WRAPPER_FACTORY = WrapperFactory()


def __getattr__(name: str) -> Any:
    if name == "TOKENIZER_REQUIRED":  # the reference's list, read from the registry
        return WRAPPER_FACTORY.tokenizer_required()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def apply_wrappers(env: Env, wrappers: str | list[str] | None, tokenizer: Any = None) -> Env:
    """``env`` wrapped by the named wrappers, in order."""
    for fn in get_wrapper_fns(wrappers, tokenizer=tokenizer):
        env = fn(env)
    return env


__all__ = [
    "WRAPPER_FACTORY",
    "EncapsulateWrapper",
    "EpisodeTrackingWrapper",
    "HistoryWrapper",
    "ObservationWrapper",
    "TimeLimit",
    "Wrapper",
    "WrapperFactory",
    "apply_wrappers",
    "get_wrapper_fns",
]
