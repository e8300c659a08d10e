"""gem.extend: the one mechanism through which a layer (gem.compat) changes the kernel's types (issue 38)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Iterator

import pytest

import gem
from gem import extend
from gem.hookspecs import hookimpl, hookspec
from gem.plugins import isolated, register_plugin
from gem.registry import _Sourced


class Plain(gem.Env):
    def __init__(self, size: int = 3) -> None:
        self.size = size

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        return str(self.rng.randrange(self.size)), {}

    def step(self, action):
        return "", 0.0, True, False, {}


@pytest.fixture
def no_points() -> Iterator[None]:
    """The kernel with no layer's points set, then compat's put back."""
    saved = extend.Points(**vars(extend.points))
    extend.points.env_call = extend.points.env_signature = extend.points.vector_reset_kwargs = None
    try:
        yield
    finally:
        vars(extend.points).update(vars(saved))


def test_compat_sets_its_points_when_gem_is_imported() -> None:
    assert extend.points.env_call is not None and extend.points.vector_reset_kwargs is not None
    env = Plain(size=5, seed=7)
    assert env.seed == 7 and "seed" in inspect.signature(Plain).parameters


def test_with_no_point_set_the_kernel_builds_envs_as_written(no_points: None) -> None:
    """The kernel's defaults are no-ops: without compat, ``seed=`` is an ordinary unknown argument, and the
    signature is the ``__init__``'s (not the metaclass's ``*args, **kwargs``)."""
    assert str(inspect.signature(Plain)) == "(size: 'int' = 3) -> 'None'"
    assert Plain(size=4).size == 4
    with pytest.raises(TypeError, match="seed"):
        Plain(seed=1)


def test_with_no_point_set_a_vector_reset_passes_every_kwarg_to_every_env(no_points: None) -> None:
    seen = []

    class Recording(Plain):
        def reset(self, seed=None, **kwargs):
            seen.append(kwargs)
            return super().reset(seed)

    from gem.vector.local import SyncVectorEnv

    vec = SyncVectorEnv([Recording, Recording])
    try:
        vec.reset(env1_kwargs={"a": 1})
    finally:
        vec.close()
    assert seen == [{"env1_kwargs": {"a": 1}}] * 2


def test_the_env_call_point_is_where_construction_goes() -> None:
    calls = []
    saved = extend.points.env_call

    def tracing(cls, args, kwargs, build):
        calls.append((cls.__name__, args, dict(kwargs)))
        return saved(cls, args, kwargs, build)

    extend.points.env_call = tracing
    try:
        env = Plain(2, seed=3)
    finally:
        extend.points.env_call = saved
    assert calls == [("Plain", (2,), {"seed": 3})] and env.seed == 3


class _Things(_Sourced):
    """A layer's registry (test): name -> the distribution that registered it."""

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[str, str] = {}

    def register(self, name: str) -> None:
        self._note()
        self.items[name] = self.source


@hookspec
def gem_register_things(registry) -> None:
    """A layer's hook (test)."""


@hookimpl(specname="gem_register_things")
def _core_things(registry) -> None:
    registry.register("core-thing")


def test_a_layer_adds_a_plugin_hook_its_registry_and_gem_cores_own_registrations() -> None:
    """How gem.compat adds gem_register_compat: a plugin implements the added hook like a kernel hook, the
    catalog holds its registry (``catalog.things``), and gem-core's own implementation runs as part of gem-core's
    plugin."""

    extend.add_catalog_hook(gem_register_things, _Things, builtin=_core_things)
    try:
        class Plugin:
            @staticmethod
            @hookimpl
            def gem_register_things(registry) -> None:
                registry.register("their-thing")

        with isolated() as catalog:
            info = register_plugin(Plugin, "things-plugin", distribution="things-dist")
            assert catalog.things is catalog.registry_for("gem_register_things")
            assert catalog.things.items == {"core-thing": "gem-core", "their-thing": "things-dist"}
            assert info.counts == {"things": 1}
            core = next(p for p in catalog.plugins if p.distribution == "gem-core")
            assert core.counts["things"] == 1 and core.counts["compat"] > 0
    finally:
        extend._catalog_hooks.pop("gem_register_things")
    with pytest.raises(ValueError, match="gem_register_<field>"):
        extend.add_catalog_hook(_Things, _Things)


def test_importing_gem_installs_no_import_hook_and_changes_nothing_outside_gem() -> None:
    """Setting compat's points is an assignment inside gem.extend: sys.meta_path, sys.path_hooks and builtins
    are as they were before ``import gem``."""
    code = (
        "import sys, builtins\n"
        "before = (list(sys.meta_path), list(sys.path_hooks), dict(vars(builtins)))\n"
        "import gem, gem.extend\n"
        "assert gem.extend.points.env_call is not None\n"
        "after = (list(sys.meta_path), list(sys.path_hooks), dict(vars(builtins)))\n"
        "print(before == after)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
