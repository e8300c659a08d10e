"""Plugin discovery: entry points in the group ``gem``, loaded lazily, one at a time.

``import gem`` loads nothing. The first call that needs the registries (``make``,
``list_envs``, the CLI, ...) loads gem-core's own plugin (``gem._builtin``, loaded by name
like an entry point, so that this module imports none of what it registers) and then each
entry point in its own ``try`` block: a broken plugin is reported (a warning, and in
``gem plugins``) and the others keep working.

Environment variables:

- ``GEM_DISABLE_PLUGIN_AUTOLOAD=1``: load no plugin but gem-core's own.
- ``GEM_PLUGINS=a,b``: load only these entry-point names.
- ``GEM_BLOCKED_PLUGINS=a,b``: never load these.
- ``GEM_STRICT_PLUGINS=1``: a plugin that fails raises :class:`~gem.errors.PluginError`.
"""

from __future__ import annotations

import os
import threading
import traceback
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from types import ModuleType, SimpleNamespace
from typing import Any

import pluggy

from gem import extend, hookspecs
from gem.data_packages import DataRegistry
from gem.errors import PluginError
from gem.provides import ProvidesRegistry
from gem.registry import EnvRegistry, NamedRegistry

ENTRY_POINT_GROUP = "gem"
BUILTIN = "gem-core"
#: gem-core's own plugin, loaded first and never switched off
BUILTIN_PLUGIN = metadata.EntryPoint("core", "gem._builtin", ENTRY_POINT_GROUP)
HOOKS = hookspecs.HOOKS


def _hooks() -> tuple[str, ...]:
    """The kernel's hooks, then those layers added (:func:`gem.extend.add_catalog_hook`)."""
    return (*HOOKS, *(hook.name for hook in extend.catalog_hooks()))


@dataclass
class PluginInfo:
    """What ``gem plugins`` shows for one plugin."""

    name: str
    distribution: str
    version: str
    module: str
    status: str = "ok"  # ok | error | blocked | disabled
    error: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class Catalog:
    """Everything the plugins registered."""

    envs: EnvRegistry = field(default_factory=EnvRegistry)
    tools: NamedRegistry = field(default_factory=lambda: NamedRegistry("tool"))
    wrappers: NamedRegistry = field(default_factory=lambda: NamedRegistry("wrapper"))
    commands: NamedRegistry = field(default_factory=lambda: NamedRegistry("command"))
    data: DataRegistry = field(default_factory=DataRegistry)
    provides: ProvidesRegistry = field(default_factory=ProvidesRegistry)
    plugins: list[PluginInfo] = field(default_factory=list)
    #: the registries of the hooks layers added (:func:`gem.extend.add_catalog_hook`), by field
    extensions: dict[str, Any] = field(
        default_factory=lambda: {hook.field: hook.new_registry() for hook in extend.catalog_hooks()})

    def __post_init__(self) -> None:
        # an unknown id's message names the suite's distribution: the installed suites' word first
        self.envs.provides = self.provides

    def registry_for(self, hook: str) -> Any:
        """The registry a hook fills (:func:`gem.hookspecs.catalog_field`)."""
        name = hookspecs.catalog_field(hook)
        return self.extensions[name] if name in self.extensions else getattr(self, name)

    def __getattr__(self, name: str) -> Any:
        # a layer's registry reads like the kernel's own: ``catalog().compat``
        extensions = self.__dict__.get("extensions", {})
        if name in extensions:
            return extensions[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


_lock = threading.RLock()
_catalog: Catalog | None = None
_loading = threading.local()
#: the catalogs :func:`isolated` swapped out, outermost first
_outside: list[Catalog | None] = []


def _env_list(name: str) -> set[str]:
    return {p.strip() for p in os.environ.get(name, "").split(",") if p.strip()}


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _entry_points() -> list[metadata.EntryPoint]:
    seen: set[tuple[str, str]] = set()
    unique = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if (ep.name, ep.value) not in seen:  # a dist on sys.path twice lists its eps twice
            seen.add((ep.name, ep.value))
            unique.append(ep)
    return sorted(unique, key=lambda ep: ep.name)


def _fail(info: PluginInfo, exc: BaseException, stage: str) -> None:
    info.status = "error"
    info.error = f"{stage}: {type(exc).__name__}: {exc}"
    message = f"gem plugin {info.name!r} (distribution {info.distribution}) failed to load: {info.error}"
    if _truthy("GEM_STRICT_PLUGINS"):
        raise PluginError(message + "\n" + "".join(traceback.format_exception(exc))) from exc
    warnings.warn(message + " (set GEM_STRICT_PLUGINS=1 to raise)", RuntimeWarning, stacklevel=4)


def _load(catalog: Catalog, modules: list[tuple[PluginInfo, ModuleType | None, Any]]) -> None:
    """Register each module with pluggy, then run every hook, one plugin per try block."""
    pm = pluggy.PluginManager("gem")
    pm.add_hookspecs(hookspecs)
    for added in extend.catalog_hooks():
        pm.add_hookspecs(type(added.name, (), {added.name: staticmethod(added.spec)}))
    loaded: list[tuple[PluginInfo, Any]] = []
    for info, _module, obj in modules:
        if obj is None:
            continue
        try:
            pm.register(obj, name=info.name)
            loaded.append((info, obj))
        except Exception as exc:
            _fail(info, exc, "register")
    for hook in _hooks():
        registry = catalog.registry_for(hook)
        for info, obj in loaded:
            if info.status != "ok":
                continue
            impl = getattr(obj, hook, None)
            if impl is None:
                continue
            before = registry.calls[info.distribution]
            argname = hookspecs.argument(hook)
            try:
                with registry.registering_as(info.distribution):
                    impl(**{argname: registry})
            except Exception as exc:
                _fail(info, exc, hook)
            info.counts[hook.removeprefix("gem_register_")] = registry.calls[info.distribution] - before


def _with_layers(module: ModuleType) -> Any:
    """gem-core's plugin: its module's hooks, and gem-core's own implementations of the hooks layers added."""
    hooks = {name: getattr(module, name) for name in HOOKS if hasattr(module, name)}
    hooks.update({hook.name: hook.builtin for hook in extend.catalog_hooks() if hook.builtin is not None})
    return SimpleNamespace(__name__=module.__name__, **hooks)


def _discover(catalog: Catalog) -> Catalog:
    allowed, blocked = _env_list("GEM_PLUGINS"), _env_list("GEM_BLOCKED_PLUGINS")
    disabled = _truthy("GEM_DISABLE_PLUGIN_AUTOLOAD")
    modules: list[tuple[PluginInfo, ModuleType | None, Any]] = []
    for ep in [BUILTIN_PLUGIN, *_entry_points()]:
        builtin = ep is BUILTIN_PLUGIN
        if builtin:
            info = PluginInfo(ep.name, BUILTIN, _version(BUILTIN), ep.value)
        else:
            dist = ep.dist.name if ep.dist is not None else "unknown"
            info = PluginInfo(ep.name, dist, ep.dist.version if ep.dist else "?", ep.value)
        catalog.plugins.append(info)
        if not builtin and disabled:
            info.status = "disabled"
            continue
        if not builtin and (ep.name in blocked or (allowed and ep.name not in allowed)):
            info.status = "blocked"
            continue
        try:
            # registrations made at import time (reference-style gem.register calls)
            # are attributed to this plugin's distribution
            with catalog.envs.registering_as(info.distribution):
                module = ep.load()
        except Exception as exc:
            _fail(info, exc, "import")
            continue
        modules.append((info, module, _with_layers(module) if builtin else module))
    _load(catalog, modules)
    catalog.envs.failed_plugins = [(p.name, p.distribution, p.error or "") for p in catalog.plugins
                                   if p.status == "error"]
    return catalog


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "dev"


def _load_catalog() -> Catalog:
    if getattr(_loading, "active", False):
        # a plugin imported at load time calls gem.register: give it the catalog under construction
        return _loading.catalog
    _loading.active = True
    try:
        _loading.catalog = Catalog()
        return _discover(_loading.catalog)
    finally:
        _loading.active = False


def catalog() -> Catalog:
    """The loaded catalog; loads plugins on first call (thread-safe)."""
    global _catalog
    if _catalog is not None:
        return _catalog
    with _lock:
        if _catalog is None:
            if getattr(_loading, "active", False):
                return _loading.catalog
            _catalog = _load_catalog()
        return _catalog


def installed() -> Catalog:
    """The catalog of the installed plugins, also while :func:`isolated` swaps in another: what
    is installed (the reference paths each package maps, say) does not change with a test's registry."""
    if not _outside:
        return catalog()
    with _lock:
        if _outside[0] is None:
            if getattr(_loading, "active", False):
                return _loading.catalog
            _outside[0] = _load_catalog()
        return _outside[0]


def reset_catalog() -> None:
    """Forget what was loaded; the next call reloads plugins (honours env vars anew)."""
    global _catalog
    with _lock:
        _catalog = None


@contextmanager
def isolated(load_plugins: bool = False) -> Iterator[Catalog]:
    """Swap in a fresh catalog for the duration (used by ``gem.testing`` fixtures).

    With ``load_plugins=False`` only gem-core's built-ins are present.
    """
    global _catalog
    with _lock:
        _outside.append(_catalog)
        if load_plugins:
            _catalog = None
            fresh = catalog()
        else:
            env = os.environ.get("GEM_DISABLE_PLUGIN_AUTOLOAD")
            os.environ["GEM_DISABLE_PLUGIN_AUTOLOAD"] = "1"
            try:
                _catalog = None
                fresh = catalog()
            finally:
                if env is None:
                    os.environ.pop("GEM_DISABLE_PLUGIN_AUTOLOAD", None)
                else:
                    os.environ["GEM_DISABLE_PLUGIN_AUTOLOAD"] = env
    try:
        yield fresh
    finally:
        with _lock:
            _catalog = _outside.pop()


def register_plugin(obj: Any, name: str, distribution: str = "user code") -> PluginInfo:
    """Load a plugin object or module by hand (e.g. with autoload disabled)."""
    cat = catalog()
    info = PluginInfo(name, distribution, "", getattr(obj, "__name__", repr(obj)))
    cat.plugins.append(info)
    _load(cat, [(info, None, obj)])
    return info
