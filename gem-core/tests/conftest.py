import pytest

from gem.testing.envs import BusyEnv, CountEnv, FaultyEnv, SlowEnv


@pytest.fixture
def count_registry(gem_registry):
    """An isolated registry holding the test envs of gem.testing.envs."""
    gem_registry.register("test:Count-v0", CountEnv)
    gem_registry.register("test:Count-v0-hard", "gem.testing.envs:CountEnv", high=100, max_turns=7)
    gem_registry.register("test:Busy-v0", BusyEnv, work=2000)
    gem_registry.register("test:Faulty-v0", FaultyEnv)
    gem_registry.register("test:Slow-v0", SlowEnv)
    return gem_registry


@pytest.fixture(autouse=True)
def release_hung_faulty_envs():
    """Steps of FaultyEnv told to "hang" (in this process's threads) end with the test."""
    FaultyEnv.hung.clear()
    yield
    FaultyEnv.hung.set()
