"""Wrappers, and the lookup of wrappers by name (GEM's ``get_wrapper_fns``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
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


def needs_tokenizer(names: list[str] | None = None) -> list[str]:
    """Of ``names`` (default: every registered wrapper), those that render a chat template and
    so need ``tokenizer=``.

    >>> needs_tokenizer(["concat_chat", "concat_with_action"])  # doctest: +SKIP
    ['concat_chat']
    """
    from gem.plugins import catalog

    registry = catalog().wrappers
    names = registry.names() if names is None else names
    return [n for n in names if n in registry and registry.get(n).meta.get("requires_tokenizer")]


def apply_wrappers(env: Env, wrappers: str | list[str] | None, tokenizer: Any = None) -> Env:
    """``env`` wrapped by the named wrappers, in order."""
    for fn in get_wrapper_fns(wrappers, tokenizer=tokenizer):
        env = fn(env)
    return env


__all__ = [
    "EncapsulateWrapper",
    "EpisodeTrackingWrapper",
    "HistoryWrapper",
    "ObservationWrapper",
    "TimeLimit",
    "Wrapper",
    "apply_wrappers",
    "get_wrapper_fns",
    "needs_tokenizer",
]
