"""Registries of envs, tools, wrappers and CLI commands, filled by plugins."""

from __future__ import annotations

import fnmatch
import functools
import importlib
import inspect
import numbers
import re
import threading
import types
import typing
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gem.errors import (
    EntryPointError,
    EnvArgumentError,
    RegistrationError,
    SuiteNotInstalledError,
    UnknownEnvError,
    did_you_mean,
    distribution_installed,
    install_hint,
)
from gem.ids import package_for, parse_env_id

USER_SOURCE = "user code"


def load_entry_point(entry_point: str | Callable[..., Any], what: str) -> Callable[..., Any]:
    """Import ``"package.module:Attr"`` (or return a callable as is)."""
    if callable(entry_point):
        return entry_point
    module_name, sep, attr = str(entry_point).partition(":")
    if not sep or not module_name or not attr:
        raise EntryPointError(f"{what}: entry point {entry_point!r} is not of the form 'package.module:Attr'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EntryPointError(f"{what}: cannot import {module_name!r} ({exc})") from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise EntryPointError(f"{what}: module {module_name!r} has no attribute {attr!r}") from exc
    return obj


@dataclass(frozen=True)
class _Param:
    """A constructor argument: the simple types its annotation allows (None: not checked)."""

    name: str
    types: tuple[type, ...] | None
    default: Any


_NONE = type(None)
_SIMPLE = {"int": int, "float": float, "bool": bool, "str": str, "None": _NONE}
_WRAPPED_IN = re.compile(r"(?:typing\.)?(Optional|Union)\[(.*)\]")


def _simple_types(annotation: Any) -> tuple[type, ...] | None:
    """The types of an annotation made of int, float, bool, str and None (``int | None``,
    ``Optional[float]``); None for anything richer, which is not checked."""
    if isinstance(annotation, str):  # postponed annotations: read the text, never evaluate it
        text = annotation.strip()
        match = _WRAPPED_IN.fullmatch(text)
        if match:
            parts = match[2].split(",") + (["None"] if match[1] == "Optional" else [])
        else:
            parts = text.split("|")
        names = [p.strip() for p in parts]
        if not all(n in _SIMPLE for n in names):
            return None
        return tuple(_SIMPLE[n] for n in names)
    if annotation is None or annotation is _NONE:
        return (_NONE,)
    if annotation in (int, float, bool, str):
        return (annotation,)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        found: tuple[type, ...] = ()
        for arg in typing.get_args(annotation):
            allowed = _simple_types(arg)
            if allowed is None:
                return None
            found += allowed
        return found
    return None


def _fits(value: Any, types: tuple[type, ...]) -> bool:
    for t in types:
        if t is _NONE and value is None:
            return True
        # numpy scalars count: np.int64 is an Integral, np.float32 a Real; an int is a fine float
        if t is int and isinstance(value, numbers.Integral):
            return True
        if t is float and isinstance(value, numbers.Real):
            return True
        if t is bool and (isinstance(value, bool) or (isinstance(value, numbers.Integral) and value in (0, 1))):
            return True
        if t is str and isinstance(value, str):
            return True
    return False


def _named(fn: Callable[..., Any], follow_wrapped: bool = True) -> tuple[list[inspect.Parameter], bool]:
    """``fn``'s keyword-passable parameters and whether it also takes ``**kwargs``."""
    params = inspect.signature(fn, follow_wrapped=follow_wrapped).parameters.values()
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


@functools.lru_cache(maxsize=1024)
def _parameters(factory: Callable[..., Any]) -> tuple[dict[str, _Param], bool] | None:
    """What ``factory`` takes by keyword, and whether it takes any keyword (``**kwargs``);
    None when it has no signature to read."""
    try:
        named, open_ended = _named(factory)
    except (TypeError, ValueError):
        return None
    # a decorator made with functools.wraps (Env's seed= for reference code) shows the wrapped
    # function's signature; the arguments the decorator names itself are taken too
    outer: Any = factory
    while isinstance(outer, functools.partial):
        outer = outer.func
    if isinstance(outer, type):
        outer = next((base.__dict__["__init__"] for base in outer.__mro__ if "__init__" in base.__dict__), None)
    while outer is not None and hasattr(outer, "__wrapped__"):
        try:
            added, _ = _named(outer, follow_wrapped=False)
        except (TypeError, ValueError):
            break
        named += [p for p in added if p.name != "self" and p.name not in {q.name for q in named}]
        outer = outer.__wrapped__
    table = {p.name: _Param(p.name, None if p.annotation is p.empty else _simple_types(p.annotation), p.default)
             for p in named}
    return table, open_ended


def _type_name(types: tuple[type, ...]) -> str:
    return " or ".join("None" if t is _NONE else t.__name__ for t in types)


def check_env_kwargs(what: str, factory: Callable[..., Any], kwargs: dict[str, Any],
                     registered: Collection[str] = ()) -> None:
    """Raise :class:`~gem.errors.EnvArgumentError` when ``factory(**kwargs)`` names an argument
    the factory does not take, or gives one a value its simple annotation (int, float, bool,
    str, None and unions of them) rules out. ``registered`` names the arguments that come from
    the registration's defaults, for the message. A factory without a readable signature, and
    any argument with a richer annotation, pass unchecked; so do names a ``**kwargs`` takes."""
    try:
        found = _parameters(factory)
    except TypeError:  # an unhashable callable: read it uncached
        found = _parameters.__wrapped__(factory)
    if found is None:
        return
    table, open_ended = found
    for name, value in kwargs.items():
        param = table.get(name)
        origin = " (a default of its registration)" if name in registered else ""
        if param is None:
            if open_ended:
                continue
            takes = ", ".join(table) or "no arguments"
            raise EnvArgumentError(f"{what} takes no argument {name!r}{origin}.{did_you_mean(name, list(table))} "
                                   f"It takes: {takes}.")
        # a default of None (or any default) is accepted as written, whatever the annotation says
        if param.types is None or _fits(value, param.types) or value is param.default:
            continue
        raise EnvArgumentError(f"{what}: {name} must be {_type_name(param.types)}, got {value!r} "
                               f"({type(value).__name__}){origin}.")


@dataclass(frozen=True)
class EnvSpec:
    """How to build one registered env: an entry point and its default kwargs."""

    id: str
    entry_point: str | Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    source: str = USER_SOURCE
    description: str | None = None

    def make(self, **overrides: Any) -> Any:
        """Build the env with the spec's defaults updated by ``overrides``."""
        factory = self.check_kwargs(**overrides)
        env = factory(**{**self.kwargs, **overrides})
        # a factory may return a wrapped env, whose env_id/spec are read-only views of the
        # innermost env's: set them there
        target = getattr(env, "unwrapped", env)
        # entry_point too: the reference's make sets it
        for attr, value in (("env_id", self.id), ("spec", self), ("entry_point", self.entry_point)):
            try:
                setattr(target, attr, value)
            except AttributeError:
                pass
        return env

    def check_kwargs(self, **overrides: Any) -> Callable[..., Any]:
        """Import the entry point and check the arguments :meth:`make` would pass it (see
        :func:`check_env_kwargs`), without building the env; returns the entry point.

        >>> gem.spec("game:GuessTheNumber-v0-easy").check_kwargs(max_turn=3)  # doctest: +SKIP
        EnvArgumentError: env 'game:GuessTheNumber-v0-easy' takes no argument 'max_turn'. Did you mean 'max_turns'? ...
        """
        factory = load_entry_point(self.entry_point, f"env {self.id!r} (from {self.source})")
        check_env_kwargs(f"env {self.id!r}", factory, {**self.kwargs, **overrides}, set(self.kwargs) - set(overrides))
        return factory

    def entry_point_name(self) -> str:
        ep = self.entry_point
        return ep if isinstance(ep, str) else f"{ep.__module__}:{getattr(ep, '__qualname__', ep)}"


class _Sourced:
    """Tracks which distribution is registering right now, to attribute entries."""

    def __init__(self) -> None:
        self._local = threading.local()
        #: registrations made by each source (``gem plugins`` shows them)
        self.calls: Counter[str] = Counter()

    def _note(self) -> None:
        self.calls[self.source] += 1

    @property
    def source(self) -> str:
        return getattr(self._local, "source", USER_SOURCE)

    @contextmanager
    def registering_as(self, source: str) -> Iterator[None]:
        previous = self.source
        self._local.source = source
        try:
            yield
        finally:
            self._local.source = previous


class EnvRegistry(_Sourced):
    """Env ids and their specs. Plugins receive it in ``gem_register_envs``."""

    def __init__(self) -> None:
        super().__init__()
        self._specs: dict[str, EnvSpec] = {}
        self._families: dict[str, EnvSpec] = {}
        #: ``(plugin name, distribution, error)`` of each gem plugin that failed to load (set by
        #: :mod:`gem.plugins`): an id of an unregistered suite names them, since one may be its provider
        self.failed_plugins: list[tuple[str, str, str]] = []
        #: which distribution provides which suite (a :class:`gem.provides.ProvidesRegistry`, set by
        #: :mod:`gem.plugins`: what the installed suites say, then the fallback table); None: the table only
        self.provides: Any = None
        self._lock = threading.RLock()

    def register(
        self,
        id: str,
        entry_point: str | Callable[..., Any],
        *,
        description: str | None = None,
        **kwargs: Any,
    ) -> EnvSpec:
        """Register ``id``; ``entry_point`` is ``"module:Class"`` or a callable.

        Nothing is imported until the env is made. ``kwargs`` become the defaults that
        :func:`gem.make` overrides.
        """
        parse_env_id(id)
        if not (callable(entry_point) or (isinstance(entry_point, str) and ":" in entry_point)):
            raise RegistrationError(
                f"env {id!r}: entry_point must be 'package.module:Class' or a callable, "
                f"got {entry_point!r}"
            )
        spec = EnvSpec(id, entry_point, dict(kwargs), self.source, description)
        self._note()
        with self._lock:
            old = self._specs.get(id)
            if old is not None:
                if old.source != spec.source:
                    raise RegistrationError(
                        f"env id {id!r} is registered by both {old.source!r} and "
                        f"{spec.source!r}; uninstall one of them or block one with "
                        "GEM_BLOCKED_PLUGINS"
                    )
                if (old.entry_point, old.kwargs) != (spec.entry_point, spec.kwargs):
                    raise RegistrationError(f"env id {id!r} is already registered by {old.source!r}")
            self._specs[id] = spec
        return spec

    def register_family(self, suite: str, entry_point: str | Callable[..., Any], argument: str, *,
                        description: str | None = None) -> None:
        """Make every id ``suite:NAME`` that is not registered one by one: ``entry_point(**{argument: NAME})``,
        for envs that come from another framework's own registry (``vf:<verifiers taskset>``).

        >>> registry.register_family("vf", "gem_integrations.verifiers:VerifiersEnv", "taskset")  # doctest: +SKIP
        """
        parse_env_id(f"{suite}:x")
        self._note()
        with self._lock:
            old = self._families.get(suite)
            if old is not None and old.source != self.source:
                raise RegistrationError(f"env id family {suite!r} is registered by both {old.source!r} and "
                                        f"{self.source!r}")
            self._families[suite] = EnvSpec(f"{suite}:*", entry_point, {"_argument": argument}, self.source,
                                            description)

    def _family_spec(self, env_id: str) -> EnvSpec | None:
        suite, _, name = env_id.partition(":")
        family = self._families.get(suite)
        if family is None or not name:
            return None
        parse_env_id(env_id)
        return EnvSpec(env_id, family.entry_point, {family.kwargs["_argument"]: name}, family.source,
                       family.description)

    def spec(self, env_id: str) -> EnvSpec:
        """The spec of ``env_id``; an unknown id raises with suggestions."""
        try:
            return self._specs[env_id]
        except (KeyError, TypeError):
            pass
        if not isinstance(env_id, str):
            raise UnknownEnvError(f"env id must be a string, got {type(env_id).__name__}")
        family = self._family_spec(env_id)
        if family is not None:
            return family
        hint = did_you_mean(env_id, list(self._specs))
        package = self.provides.package_for(env_id) if self.provides is not None else package_for(env_id)
        suite = env_id.split(":")[0]
        if self.failed_plugins and not any(i.split(":")[0] == suite for i in self._specs):
            failed = "; ".join(f"{name!r} ({dist}): {error}" for name, dist, error in self.failed_plugins)
            raise UnknownEnvError(
                f"No env {env_id!r}: no loaded plugin registers suite {suite!r}, and a gem plugin that may provide "
                f"it failed to load: {failed}. `gem plugins` shows it; GEM_STRICT_PLUGINS=1 raises its traceback.")
        if package and not any(i.split(":")[0] == env_id.split(":")[0] for i in self._specs):
            raise SuiteNotInstalledError(
                f"No env {env_id!r}: its suite is not installed. Install {package} {install_hint(package)}.{hint}"
            )
        lines = [f"No env {env_id!r}.{hint}"]
        if not hint:
            lines.append(f"Known suites: {', '.join(self.suites())}." if self._specs else "No envs are registered.")
        if package and not distribution_installed(package):
            lines.append(f"If it comes from {package}, install it {install_hint(package)}.")
        lines.append("`gem list` shows every id.")
        raise UnknownEnvError("\n".join(lines))

    def ids(self, pattern: str | None = None) -> list[str]:
        """Registered ids, sorted; ``pattern`` is a glob or a substring."""
        ids = sorted(self._specs)
        if not pattern:
            return ids
        if any(ch in pattern for ch in "*?["):
            return [i for i in ids if fnmatch.fnmatchcase(i.lower(), pattern.lower())]
        return [i for i in ids if pattern.lower() in i.lower()]

    def suites(self) -> list[str]:
        return sorted({i.split(":")[0] for i in self._specs})

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def get(self, env_id: str, default: Any = None) -> EnvSpec | Any:
        return self._specs.get(env_id, default)


class LazyFactory:
    """A factory named ``"package.module:attr"``, imported on its first call (registering is cheap)."""

    def __init__(self, target: str, what: str) -> None:
        self.target, self.what = target, what
        self._loaded: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._loaded is None:
            self._loaded = load_entry_point(self.target, self.what)
        return self._loaded(*args, **kwargs)

    def __repr__(self) -> str:
        return f"LazyFactory({self.target!r})"


@dataclass(frozen=True)
class Entry:
    """One named entry of a :class:`NamedRegistry`."""

    name: str
    factory: Callable[..., Any]
    source: str
    meta: dict[str, Any] = field(default_factory=dict)


class NamedRegistry(_Sourced):
    """Named factories (tools, wrappers, commands). Plugins receive one per hook."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def register(self, name: str, factory: Callable[..., Any] | str, **meta: Any) -> Entry:
        """Register ``factory`` (a callable, or ``"package.module:attr"`` imported on first use)
        under ``name``; ``meta`` holds per-kind options."""
        if isinstance(factory, str):
            factory = LazyFactory(factory, f"{self.kind} {name!r}")
        if not callable(factory):
            raise RegistrationError(f"{self.kind} {name!r}: factory must be callable, got {factory!r}")
        entry = Entry(name, factory, self.source, dict(meta))
        self._note()
        old = self._entries.get(name)
        if old is not None and old.source != entry.source:
            raise RegistrationError(
                f"{self.kind} {name!r} is registered by both {old.source!r} and {entry.source!r}"
            )
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            from gem.errors import UnknownToolError, UnknownWrapperError

            error = {"tool": UnknownToolError, "wrapper": UnknownWrapperError}.get(self.kind, LookupError)
            known = ", ".join(sorted(self._entries)) or "none"
            raise error(
                f"No {self.kind} {name!r}.{did_you_mean(name, list(self._entries))} Known: {known}."
            ) from None

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries
