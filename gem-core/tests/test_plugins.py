"""Plugin loading, with entry points faked by patching importlib.metadata."""

import sys
import textwrap
import warnings
from importlib import metadata

import pytest

import gem
from gem import plugins
from gem.errors import PluginError

GOOD = """
import gem

@gem.hookimpl
def gem_register_envs(registry):
    registry.register("good:Count-v0", "gem.testing.envs:CountEnv", high=3)

@gem.hookimpl
def gem_register_wrappers(registry):
    registry.register("good_wrapper", lambda env: gem.Wrapper(env))
"""

BROKEN_IMPORT = "raise ImportError('this plugin needs a package that is missing')\n"

BROKEN_HOOK = """
import gem

@gem.hookimpl
def gem_register_envs(registry):
    raise RuntimeError('hook exploded')
"""

REFERENCE_STYLE = """
import gem
gem.register("refstyle:Count-v0", "gem.testing.envs:CountEnv")
"""


@pytest.fixture
def fake_plugins(tmp_path, monkeypatch):
    sources = {
        "good_plugin": GOOD,
        "broken_import_plugin": BROKEN_IMPORT,
        "broken_hook_plugin": BROKEN_HOOK,
        "refstyle_plugin": REFERENCE_STYLE,
    }
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.delitem(sys.modules, name, raising=False)  # import-time code must run again
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [metadata.EntryPoint(n.removesuffix("_plugin"), n, "gem") for n in sources]
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: eps if group == "gem" else [])
    for var in ("GEM_PLUGINS", "GEM_BLOCKED_PLUGINS", "GEM_DISABLE_PLUGIN_AUTOLOAD", "GEM_STRICT_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _status(catalog):
    return {p.name: p.status for p in catalog.plugins}


def test_a_broken_plugin_does_not_stop_the_others(fake_plugins):
    with pytest.warns(RuntimeWarning, match="broken_import"), plugins.isolated(load_plugins=True) as cat:
        assert _status(cat) == {
            "core": "ok", "broken_hook": "error", "broken_import": "error", "good": "ok", "refstyle": "ok",
        }
        assert gem.make("good:Count-v0").high == 3
        assert "good_wrapper" in cat.wrappers
        errors = {p.name: p.error for p in cat.plugins if p.error}
        assert "hook exploded" in errors["broken_hook"]
        assert "missing" in errors["broken_import"]


def test_reference_style_import_time_registration_is_attributed(fake_plugins):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with plugins.isolated(load_plugins=True):
            assert gem.spec("refstyle:Count-v0").source == "unknown"  # fake eps have no distribution
            assert gem.make("refstyle:Count-v0").high == 10


def test_strict_mode_raises(fake_plugins):
    fake_plugins.setenv("GEM_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="broken_hook|broken_import"), plugins.isolated(load_plugins=True):
        pass


def test_allow_list_and_block_list(fake_plugins):
    fake_plugins.setenv("GEM_PLUGINS", "good")
    with plugins.isolated(load_plugins=True) as cat:
        assert _status(cat)["good"] == "ok" and _status(cat)["broken_hook"] == "blocked"
    fake_plugins.delenv("GEM_PLUGINS")
    fake_plugins.setenv("GEM_BLOCKED_PLUGINS", "broken_import, broken_hook")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing broken loads, so nothing warns
        with plugins.isolated(load_plugins=True) as cat:
            assert _status(cat)["broken_import"] == "blocked" and _status(cat)["good"] == "ok"


def test_disable_autoload_keeps_builtins_and_allows_manual_registration(fake_plugins):
    fake_plugins.setenv("GEM_DISABLE_PLUGIN_AUTOLOAD", "1")
    with plugins.isolated(load_plugins=True) as cat:
        assert _status(cat)["good"] == "disabled"
        assert "concat" in cat.wrappers
        assert "good:Count-v0" not in cat.envs
        import good_plugin

        plugins.register_plugin(good_plugin, "good-by-hand")
        assert gem.make("good:Count-v0").high == 3


def test_plugin_counts_are_reported(fake_plugins):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with plugins.isolated(load_plugins=True) as cat:
            good = next(p for p in cat.plugins if p.name == "good")
            assert good.counts["envs"] == 1 and good.counts["wrappers"] == 1


def test_an_id_of_a_suite_no_plugin_registers_names_the_plugin_that_failed(fake_plugins):
    """Issue 34, point 6: gem.make("bad:Foo-v0") for a plugin that failed to load said "No env ... Did you
    mean ...", not that the plugin that would provide it failed."""
    with pytest.warns(RuntimeWarning), plugins.isolated(load_plugins=True):
        with pytest.raises(gem.errors.UnknownEnvError) as info:
            gem.make("broken_import:Foo-v0")
        message = str(info.value)
        assert ("no loaded plugin registers suite 'broken_import', and a gem plugin that may provide it "
                "failed") in message
        assert "'broken_import' (unknown): import: ImportError: this plugin needs a package that is missing" in message
        assert "hook exploded" in message and "`gem plugins` shows it" in message
        with pytest.raises(gem.errors.UnknownEnvError, match="Did you mean 'good:Count-v0'"):
            gem.make("good:Cuont-v0")  # a suite that loaded: the usual hint
