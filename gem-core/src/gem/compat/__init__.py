"""The reference package's module paths, resolved to our objects (see :mod:`gem.compat.table`).

``import gem`` appends :class:`ReferencePathFinder` to ``sys.meta_path``. Because it comes
after the normal finders, a real module always wins; the finder only answers for paths in
:data:`~gem.compat.table.TABLE` (and the packages above them) that nothing else provides:

>>> from gem.envs.registration import make            # doctest: +SKIP
>>> from gem.tools.python_code_tool import PythonCodeTool  # doctest: +SKIP

A module of names is synthesised empty; each name is looked up in its target when it is
accessed (module ``__getattr__``), so importing a reference path costs nothing until it is
used. A module that aliases a whole module of ours *is* that module. A path whose suite is
not installed raises :class:`ImportError` saying what to ``pip install``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

from gem.compat.table import EXTRA_REQUIREMENTS, INSTALL, TABLE
from gem.errors import install_hint

#: packages that exist only because table entries sit below them (``gem.envs``, ...)
PACKAGES = {key.rsplit(".", i)[0] for key in TABLE for i in range(1, key.count("."))}


def _target_module(target: str) -> str:
    return target.partition(":")[0]


def requirements(path: str) -> list[str]:
    """Top-level packages that the objects of reference module ``path`` need."""
    entry = TABLE[path]
    targets = [entry] if isinstance(entry, str) else [_target_module(t) for t in entry.values()]
    tops = [t.split(".")[0] for t in targets] + list(EXTRA_REQUIREMENTS.get(path, ()))
    return sorted({t for t in tops if t != "gem"})


def missing_message(path: str, missing: list[str]) -> str:
    """The ImportError text for a reference path whose suite is absent."""
    wanted = sorted({INSTALL.get(top, top) for top in missing})
    how = "; ".join(f"install {w} {install_hint(w)}" for w in wanted)
    return f"{path} (a module path of the reference GEM package) needs {', '.join(wanted)}, not installed: {how}"


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
        if name not in names and any(key == child or key.startswith(child + ".") for key in TABLE):
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
        entry = TABLE.get(self.path)
        if entry is None:  # a package that only holds other reference paths
            return None
        missing = [top for top in requirements(self.path) if importlib.util.find_spec(top) is None]
        if missing:
            raise ImportError(missing_message(self.path, missing), name=self.path)
        if isinstance(entry, str):
            return importlib.import_module(entry)  # the module of ours that stands in for it
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        entry = TABLE.get(self.path)
        if isinstance(entry, str):
            return
        names = entry or {}
        module.__doc__ = f"The reference package's {self.path}, resolved lazily to GEM's objects (gem.compat)."
        module.__all__ = sorted(names)  # type: ignore[attr-defined]
        module.__getattr__ = _module_getattr(module, names)  # type: ignore[attr-defined]
        module.__dir__ = lambda: sorted({*names, *module.__dict__})  # type: ignore[attr-defined]

    def get_code(self, fullname: str) -> types.CodeType | None:
        """The code ``python -m <reference path>`` runs: that of the module of ours."""
        entry = TABLE.get(self.path)
        if not isinstance(entry, str):
            return None
        spec = importlib.util.find_spec(entry)
        loader = spec.loader if spec else None
        return loader.get_code(entry) if isinstance(loader, importlib.abc.InspectLoader) else None


class ReferencePathFinder(importlib.abc.MetaPathFinder):
    """Finds the reference package's module paths that the table maps."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in TABLE and fullname not in PACKAGES:
            return None
        spec = importlib.machinery.ModuleSpec(fullname, _ReferenceLoader(fullname), is_package=fullname in PACKAGES)
        entry = TABLE.get(fullname)
        if isinstance(entry, str):  # ``python -m`` runs the file of ours: name it as argv[0]
            try:
                ours = importlib.util.find_spec(entry)
            except ImportError:  # its suite is absent: create_module says so
                ours = None
            spec.origin = ours.origin if ours else None
        if fullname in PACKAGES:
            spec.submodule_search_locations = []
        return spec


_FINDER = ReferencePathFinder()


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once), after the normal finders."""
    if not any(isinstance(f, ReferencePathFinder) for f in sys.meta_path):
        sys.meta_path.append(_FINDER)


__all__ = ["PACKAGES", "TABLE", "ReferencePathFinder", "install", "requirements", "resolve"]
