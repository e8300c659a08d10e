import pytest

import gem_evals.plugin
from gem.plugins import register_plugin
from gem.testing.envs import CountEnv, FaultyEnv


@pytest.fixture
def count_registry(gem_registry):
    """An isolated registry holding gem.testing's guess-the-number env as ``test:Count-v0``, with
    ``gem eval`` registered (an isolated catalog loads no plugin by itself)."""
    register_plugin(gem_evals.plugin, "evals", "gem-evals")
    gem_registry.register("test:Count-v0", CountEnv)
    return gem_registry


@pytest.fixture(autouse=True)
def release_hung_faulty_envs():
    """Steps of FaultyEnv told to "hang" (in this process's threads) end with the test."""
    FaultyEnv.hung.clear()
    yield
    FaultyEnv.hung.set()
