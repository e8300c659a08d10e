"""The reference package's module paths, resolved to our objects.

Each package contributes the rows of the objects it holds through the
``gem_register_compat`` hook (:mod:`gem.compat.rows`; gem-core's own are in
:mod:`gem.compat.table`), a hook this package adds to the plugin catalog. ``import gem``
installs nothing: the reference's top-level packages
(``gem.envs``, ``gem.utils``, ``gem.tools``, ``gem.eval``, ``gem.integrations``) and its
modules inside our real packages (``gem.wrappers.wrapper_factory``, ``gem.vector.vector_env``, ...)
are small files of gem-core that call :func:`become_reference`, which appends
:class:`ReferencePathFinder` to ``sys.meta_path`` the first time a script imports a reference
path (a path of another root: call :func:`install` first). Because the finder comes after
the normal finders, a real module always wins; it only answers for registered paths (and the
packages above them) that nothing else provides, loading the plugins on the first such import:

>>> from gem.envs.registration import make            # doctest: +SKIP
>>> from gem.tools.python_code_tool import PythonCodeTool  # doctest: +SKIP

A module of names is synthesised empty; each name is looked up in its target when it is
accessed (module ``__getattr__``), so importing a reference path costs nothing until it is
used. A module that aliases a whole module of ours *is* that module. A path whose suite is
not installed raises :class:`ImportError` saying what to ``pip install`` (what the installed suites
say through ``gem_register_provides``, :mod:`gem.provides`; for the others
:data:`~gem.compat.table.PROVIDERS`).

The shims that let the reference's calling conventions reach our objects live here too:
:mod:`gem.compat.ctor_seed` (every env class takes the reference's ``seed=`` constructor
argument) and :mod:`gem.compat.shims` (the registry read as a dict, ``ENV_REGISTRY``,
``WRAPPER_FACTORY``, vector ``env{i}_kwargs``).

This package reaches the kernel's types only through :mod:`gem.extend`, whose points it sets when
imported (below): the constructor's ``seed=``, the vector ``env{i}_kwargs``, and the
``gem_register_compat`` hook with its registry. No kernel module imports it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

from gem import extend
from gem.compat import ctor_seed
from gem.compat.rows import CompatRegistry, gem_register_compat, register_core_rows
from gem.compat.table import PROVIDERS
from gem.errors import distribution_installed, install_hint


def _per_env_kwargs(kwargs: dict[str, Any], num_envs: int) -> dict[int, dict[str, Any]]:
    # gem.compat.shims loads the registries and wrappers, which ``import gem`` does not: only on first use
    from gem.compat.shims import per_env_kwargs

    return per_env_kwargs(kwargs, num_envs)


# what the reference's conventions change in the kernel's types, through its one mechanism (gem.extend)
extend.points.env_call = ctor_seed.construct
extend.points.env_signature = ctor_seed.signature
extend.points.vector_reset_kwargs = _per_env_kwargs
extend.add_catalog_hook(gem_register_compat, CompatRegistry, builtin=register_core_rows)


def _registry() -> CompatRegistry:
    from gem.plugins import installed

    return installed().compat


def rows() -> dict[str, dict[str, str] | str]:
    """Every reference path the installed packages map, and its row (loads the plugins)."""
    return _registry().rows()


def provider(path: str) -> str | None:
    """The distribution that maps ``path`` (or a path below it) in a full install: what an installed suite
    says through ``gem_register_provides``, else the fallback table for suites not installed
    (:data:`~gem.compat.table.PROVIDERS`)."""
    from gem.plugins import installed

    return installed().provides.path_provider(path, PROVIDERS)


def _target_module(target: str) -> str:
    return target.partition(":")[0]


def requirements(path: str) -> dict[str, str]:
    """Top-level packages that the objects of reference module ``path`` need -> what to
    install for each."""
    registry = _registry()
    entry = registry.get(path)
    if entry is None:
        return {}
    targets = [entry] if isinstance(entry, str) else [_target_module(t) for t in entry.values()]
    source = registry.source_of(path) or ""
    wanted = {t.split(".")[0]: source for t in targets}
    wanted.update(registry.needs(path))
    return {top: install for top, install in sorted(wanted.items()) if top not in ("gem", "numpy")}


def missing_message(path: str, wanted: list[str]) -> str:
    """The ImportError text for a reference path whose distribution (or extra) is absent."""
    wanted = sorted(set(wanted))
    how = "; ".join(f"install {w} {install_hint(w)}" for w in wanted)
    return f"{path} (a module path of the reference GEM package) needs {', '.join(wanted)}, not installed: {how}"


def _absent_message(path: str, distribution: str) -> str:
    base = distribution.partition("[")[0]
    if distribution_installed(base):
        return (f"{path} (a module path of the reference GEM package) is provided by {base}, which is installed "
                "but whose plugin did not load: see `gem plugins`")
    return missing_message(path, [distribution])


def resolve(target: str) -> Any:
    """Import ``"module:attr"`` (or a whole ``"module"``) and return the object."""
    module_name, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def _module_getattr(module: types.ModuleType, names: dict[str, str]):
    def __getattr__(name: str) -> Any:
        child = f"{module.__name__}.{name}"
        if name not in names and any(key == child or key.startswith(child + ".") for key in rows()):
            # a submodule reached as an attribute (``gem.envs.registration``), as after the
            # reference's ``import gem``, which imports it
            return importlib.import_module(child)
        if name not in names:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        # resolved on every access, not cached: some targets are live views (the registry,
        # the wrapper names) that plugins and isolated test registries change
        return resolve(names[name])

    return __getattr__


class _ReferenceLoader(importlib.abc.Loader):
    """Builds the module of one reference path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        registry = _registry()
        entry = registry.get(self.path)
        if entry is None:
            if self.path in registry.packages():  # a package that only holds other reference paths
                return None
            raise ImportError(_absent_message(self.path, provider(self.path) or "?"), name=self.path)
        missing = [install for top, install in requirements(self.path).items() if importlib.util.find_spec(top) is None]
        if missing:
            raise ImportError(missing_message(self.path, missing), name=self.path)
        if isinstance(entry, str):
            ours = importlib.import_module(entry)  # the module of ours that stands in for it
            if hasattr(ours, "__path__"):
                _ALIASED_PACKAGES[self.path] = entry
            return ours
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        entry = _registry().get(self.path)
        if isinstance(entry, str):
            return
        names = entry or {}
        module.__doc__ = f"The reference package's {self.path}, resolved lazily to GEM's objects (gem.compat)."
        module.__all__ = sorted(names)  # type: ignore[attr-defined]
        module.__getattr__ = _module_getattr(module, names)  # type: ignore[attr-defined]
        module.__dir__ = lambda: sorted({*names, *module.__dict__})  # type: ignore[attr-defined]

    def get_code(self, fullname: str) -> types.CodeType | None:
        """The code ``python -m <reference path>`` runs: that of the module of ours."""
        entry = _registry().get(self.path)
        if not isinstance(entry, str):
            return None
        spec = importlib.util.find_spec(entry)
        loader = spec.loader if spec else None
        return loader.get_code(entry) if isinstance(loader, importlib.abc.InspectLoader) else None


class ReferencePathFinder(importlib.abc.MetaPathFinder):
    """Finds the reference package's module paths that the table maps."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("gem."):
            return None
        registry = _registry()
        packages = registry.packages()
        if fullname not in registry and fullname not in packages:
            if provider(fullname) is None:
                return None
            # a path of an absent distribution: its loader raises the ImportError saying what to install
            packages = {fullname}
        spec = importlib.machinery.ModuleSpec(fullname, _ReferenceLoader(fullname), is_package=fullname in packages)
        entry = registry.get(fullname)
        if isinstance(entry, str):  # ``python -m`` runs the file of ours: name it as argv[0]
            try:
                ours = importlib.util.find_spec(entry)
            except ImportError:  # its suite is absent: create_module says so
                ours = None
            spec.origin = ours.origin if ours else None
        if fullname in packages:
            spec.submodule_search_locations = []
        return spec


_FINDER = ReferencePathFinder()

#: reference paths that stand for a whole package of ours (``gem.eval`` -> ``gem_evals``)
_ALIASED_PACKAGES: dict[str, str] = {}


class _ModuleAlias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class AliasedChildFinder(importlib.abc.MetaPathFinder):
    """Finds the modules below a path that stands for a whole package of ours: ``gem.eval.cli``
    *is* ``gem_evals.cli``. It comes before the normal finders, which would otherwise load a
    second copy of the file through the package's ``__path__``."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        parent, _, leaf = fullname.rpartition(".")
        ours = _ALIASED_PACKAGES.get(parent)
        if ours is None:
            return None
        if fullname in _registry():  # a row of its own decides
            return _FINDER.find_spec(fullname)
        return importlib.machinery.ModuleSpec(fullname, _ModuleAlias(f"{ours}.{leaf}"))


_CHILD_FINDER = AliasedChildFinder()


def become_reference(name: str) -> None:
    """Make the module being imported as ``name`` (a file of gem-core standing at a reference
    path) the reference module the table describes, installing the finder for the paths below
    it: called by those files, so that the finder is installed only once a reference path is
    imported. A path whose suite is absent raises the ImportError saying what to install."""
    install()
    spec = _FINDER.find_spec(name)
    if spec is None:
        raise ImportError(f"{name} is not a reference path of the installed packages", name=name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # what the import of ``name`` returns (it reads sys.modules back)
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except BaseException:
        sys.modules.pop(name, None)
        raise


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once), after the normal finders, and the finder of
    aliased packages' modules before them."""
    if not any(isinstance(f, ReferencePathFinder) for f in sys.meta_path):
        sys.meta_path.append(_FINDER)
    if not any(isinstance(f, AliasedChildFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _CHILD_FINDER)


__all__ = ["ReferencePathFinder", "become_reference", "install", "provider", "requirements", "resolve", "rows"]
