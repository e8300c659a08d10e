"""The kernel's extension points: the one way a layer outside the kernel changes how its types behave.

The kernel's types call each point at one fixed place, and a point nobody set does nothing. A layer
sets the points it needs when it is imported, and the kernel never imports the layer
(``tests/test_import_graph.py`` checks it). Today the one such layer is :mod:`gem.compat`, the
reference package's conventions; ``gem/__init__`` imports it, so its points are set whenever ``gem``
is imported, and setting one is a plain assignment here: nothing outside ``gem`` changes.

The points, and the kernel code that calls each:

- :data:`points.env_call` ``(cls, args, kwargs, build) -> env``: how ``EnvClass(*args, **kwargs)``
  builds an env (:class:`gem.core.EnvType`, the metaclass of :class:`gem.Env`); ``build(*args, **kwargs)``
  is the plain construction. Default: ``build(*args, **kwargs)``.
- :data:`points.env_signature` ``(cls, signature) -> signature``: what ``inspect.signature(EnvClass)``
  shows, given its ``__init__``'s parameters without ``self``. Default: that signature.
- :data:`points.vector_reset_kwargs` ``(kwargs, num_envs) -> {i: kwargs_i}``: arguments of a vector
  env's ``reset`` meant for env ``i`` only, taken out of ``kwargs`` (:meth:`gem.vector.VectorEnv.reset`).
  Default: none.
- :func:`add_catalog_hook`: a plugin hook ``gem_register_<field>`` of the layer's own, the registry it fills
  (``catalog.registry_for(hook)``, also ``catalog.<field>``) and gem-core's own registrations for it
  (:mod:`gem.plugins` runs them as part of gem-core's plugin). Plugins implement it like the kernel's hooks.

>>> from gem import extend
>>> extend.points.env_call.__module__             # set by gem.compat, which ``import gem`` imports
'gem.compat.ctor_seed'
>>> [hook.name for hook in extend.catalog_hooks()]
['gem_register_compat']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Points:
    """The settable points (see the module docstring); ``None``: the kernel's default."""

    env_call: Callable[[type, tuple[Any, ...], dict[str, Any], Callable[..., Any]], Any] | None = None
    env_signature: Callable[[type, Any], Any] | None = None
    vector_reset_kwargs: Callable[[dict[str, Any], int], dict[int, dict[str, Any]]] | None = None


#: the one set of points the kernel reads
points = Points()


@dataclass(frozen=True)
class CatalogHook:
    """A plugin hook a layer adds (see :func:`add_catalog_hook`)."""

    spec: Callable[..., Any]
    new_registry: Callable[[], Any]
    builtin: Callable[..., Any] | None

    @property
    def name(self) -> str:
        return self.spec.__name__

    @property
    def field(self) -> str:
        return self.name.removeprefix("gem_register_")


_catalog_hooks: dict[str, CatalogHook] = {}


def add_catalog_hook(spec: Callable[..., Any], new_registry: Callable[[], Any],
                     builtin: Callable[..., Any] | None = None) -> None:
    """Add the plugin hook ``spec`` (a function named ``gem_register_<field>`` marked with
    :data:`gem.hookspecs.hookspec`), filling a registry that ``new_registry()`` builds for each catalog;
    ``builtin`` (marked with :data:`gem.hookimpl`) is gem-core's own implementation. Catalogs built after
    this call have it; adding the same hook again replaces it."""
    if not spec.__name__.startswith("gem_register_"):
        raise ValueError(f"a catalog hook is named gem_register_<field>, got {spec.__name__!r}")
    _catalog_hooks[spec.__name__] = CatalogHook(spec, new_registry, builtin)


def catalog_hooks() -> tuple[CatalogHook, ...]:
    """The hooks layers added, in the order they were added."""
    return tuple(_catalog_hooks.values())


__all__ = ["CatalogHook", "Points", "add_catalog_hook", "catalog_hooks", "points"]
