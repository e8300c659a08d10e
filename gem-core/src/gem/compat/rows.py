"""The rows of the reference-path table, as each package contributes its own.

A package whose objects stand in for the reference package's (gem-core for the registry,
wrappers and vector envs; gem-envs-games for the games; gem-tools for the tools; ...)
implements the ``gem_register_compat`` hook::

    @gem.hookimpl
    def gem_register_compat(registry):
        # the names a reference module offers -> "our.module:attr"
        registry.register("gem.envs.game_env.wordle", {"WordleEnv": "gem_envs_games.wordle:WordleEnv"})
        # or one module of ours that stands in for the whole module
        registry.register("gem.tools.mcp_server.time_mcp", "gem_tools.mcp_servers.time_server",
                          needs={"mcp": "gem-tools[mcp]"})

``needs`` names the top-level packages an optional extra brings (beyond the targets' own)
and what to install for each; :mod:`gem.compat` checks them when the path is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gem.compat.table import CORE_ROWS
from gem.errors import RegistrationError
from gem.hookspecs import hookimpl, hookspec
from gem.registry import _Sourced


@hookspec
def gem_register_compat(registry: Any) -> None:
    """Map the reference package's module paths to this package's objects:
    ``registry.register("gem.envs.game_env.wordle", {"WordleEnv": "mysuite.wordle:WordleEnv"})``."""


@hookimpl(specname="gem_register_compat")
def register_core_rows(registry: Any) -> None:
    """gem-core's own rows (:data:`gem.compat.table.CORE_ROWS`), registered as part of gem-core's plugin."""
    for path, row in CORE_ROWS.items():
        registry.register(path, row)


class CompatRegistry(_Sourced):
    """Reference module paths, each mapped to ours by the distribution that holds the objects."""

    kind = "reference path"

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[str, dict[str, str] | str] = {}
        self._needs: dict[str, dict[str, str]] = {}
        self._sources: dict[str, str] = {}

    def register(self, path: str, target: Mapping[str, str] | str, needs: Mapping[str, str] | None = None) -> None:
        """Map reference module ``path`` to ``target`` (see the module docstring)."""
        if not isinstance(path, str) or not path.startswith("gem."):
            raise RegistrationError(f"reference path {path!r}: must be a module path below 'gem.'")
        if isinstance(target, str):
            row: dict[str, str] | str = target
        elif isinstance(target, Mapping) and all(isinstance(v, str) and ":" in v for v in target.values()):
            row = dict(target)
        else:
            raise RegistrationError(
                f"reference path {path!r}: target must be 'our.module' or {{name: 'our.module:attr'}}, got {target!r}"
            )
        self._note()
        old = self._sources.get(path)
        if old is not None and old != self.source:
            raise RegistrationError(f"reference path {path!r} is registered by both {old!r} and {self.source!r}")
        self._rows[path] = row
        self._sources[path] = self.source
        self._needs[path] = dict(needs or {})

    def rows(self) -> dict[str, dict[str, str] | str]:
        """Every registered path and its row."""
        return dict(self._rows)

    def get(self, path: str) -> dict[str, str] | str | None:
        return self._rows.get(path)

    def source_of(self, path: str) -> str | None:
        """The distribution that registered ``path``."""
        return self._sources.get(path)

    def needs(self, path: str) -> dict[str, str]:
        """Top-level packages beyond its targets that ``path`` needs -> what to install for each."""
        return dict(self._needs.get(path, {}))

    def packages(self) -> set[str]:
        """Paths that exist only because rows sit below them (``gem.envs``, ``gem.tools``, ...)."""
        return {path.rsplit(".", i)[0] for path in self._rows for i in range(1, path.count("."))}

    def names(self) -> list[str]:
        return sorted(self._rows)

    def __contains__(self, path: object) -> bool:
        return path in self._rows
