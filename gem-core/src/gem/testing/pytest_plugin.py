"""pytest fixtures for env authors (loaded automatically through ``pytest11``).

- ``gem_registry``: an isolated env registry holding only what the test registers
  (gem-core's built-in wrappers stay available); the global one is restored after.
- ``gem_catalog``: the isolated catalog itself (envs, tools, wrappers, plugins).
- ``gem_plugins_catalog``: a fresh catalog with every installed plugin loaded.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gem.plugins import Catalog, isolated
from gem.registry import EnvRegistry


@pytest.fixture
def gem_catalog() -> Iterator[Catalog]:
    with isolated(load_plugins=False) as catalog:
        yield catalog


@pytest.fixture
def gem_registry(gem_catalog: Catalog) -> EnvRegistry:
    return gem_catalog.envs


@pytest.fixture
def gem_plugins_catalog() -> Iterator[Catalog]:
    with isolated(load_plugins=True) as catalog:
        yield catalog
