"""Suite knowledge from the suites' own plugin hooks, the tables only for suites not installed (issue 38)."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata

import pytest

import gem
from gem import ids
from gem.compat.table import PROVIDERS
from gem.errors import RegistrationError, SuiteNotInstalledError
from gem.plugins import catalog, isolated, register_plugin
from gem.provides import ProvidesRegistry, undeclared


class ZzPlugin:
    """A third-party suite no table names: its ``zz:`` ids need its extra ``fancy``."""

    @staticmethod
    @gem.hookimpl
    def gem_register_provides(registry) -> None:
        registry.suite("zz", extra="fancy")
        registry.command("zz-serve")
        registry.reference_path("gem.envs.zz_env", extra="fancy")


def test_a_prefix_a_suites_hook_names_gets_its_install_hint_without_a_table_entry() -> None:
    """Before, only gem.ids' table named suites: an id of a suite it did not list said "No env", never what to
    install, however the suite described itself."""
    assert "zz" not in ids.SUITE_PACKAGES
    with isolated():
        register_plugin(ZzPlugin, "zz", distribution="zz-dist")
        with pytest.raises(SuiteNotInstalledError, match=r"Install zz-dist\[fancy\]"):
            gem.make("zz:Thing-v0")


def test_a_suites_hook_wins_over_the_fallback_table() -> None:
    """The table says gem-envs-math provides ``math:``; an installed suite that says it provides ``math:`` is
    the one named (the table is read only for suites that are not installed)."""
    with isolated():

        class OtherMath:
            @staticmethod
            @gem.hookimpl
            def gem_register_provides(registry) -> None:
                registry.suite("math", extra="big")

        register_plugin(OtherMath, "other-math", distribution="other-math")
        with pytest.raises(SuiteNotInstalledError, match=r"Install other-math\[big\]") as raised:
            gem.make("math:GSM8K")
        assert "gem-envs-math" not in str(raised.value)


def test_the_fallback_tables_still_name_suites_that_are_not_installed(capsys: pytest.CaptureFixture[str]) -> None:
    from gem.cli import main

    with isolated():  # gem-core alone: no suite's hook answers
        assert not catalog().provides.names()
        with pytest.raises(SuiteNotInstalledError, match="gem-envs-math"):
            gem.make("math:GSM8K")
        with pytest.raises(SuiteNotInstalledError, match="gem-envs-qa"):
            gem.make("eval:HotpotQA")
        assert catalog().provides.path_provider("gem.envs.math_env.x", PROVIDERS) == "gem-envs-math"
        assert main(["qa-recall"]) == 2
    assert "gem-envs-qa" in capsys.readouterr().err


def test_a_command_a_suites_hook_names_gets_its_hint(capsys: pytest.CaptureFixture[str]) -> None:
    from gem.cli import main

    with isolated():
        register_plugin(ZzPlugin, "zz", distribution="zz-dist")
        assert main(["zz-serve"]) == 2
    assert "gem zz-serve is provided by zz-dist" in capsys.readouterr().err


def test_a_reference_path_a_suites_hook_names_says_what_to_install() -> None:
    """Before, a reference path outside compat's table was a bare ModuleNotFoundError. In a process of its own:
    the plugin goes into the installed catalog, which the reference-path finder reads."""
    code = (
        "import gem\n"
        "from gem.plugins import register_plugin\n"
        f"from {__name__.rpartition('.')[2]} import ZzPlugin\n"
        "register_plugin(ZzPlugin, 'zz', distribution='zz-dist')\n"
        "try:\n"
        "    import gem.envs.zz_env.board\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), *sys.path])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "zz-dist[fancy]" in out.stdout, out.stdout + out.stderr
    assert "ModuleNotFoundError" not in out.stdout


def test_two_distributions_cannot_both_provide_a_prefix() -> None:
    registry = ProvidesRegistry()
    with registry.registering_as("a"):
        registry.suite("zz")
        registry.suite("zz")  # the same distribution again: fine
    with registry.registering_as("b"), pytest.raises(RegistrationError, match="provided by both 'a' and 'b'"):
        registry.suite("zz")
    with pytest.raises(RegistrationError, match="extra"):
        registry.command("x", extra="no spaces")
    with pytest.raises(RegistrationError, match="below 'gem.'"):
        registry.reference_path("numpy.linalg")


def _installed(distribution: str) -> bool:
    try:
        metadata.distribution(distribution.partition("[")[0])
    except metadata.PackageNotFoundError:
        return False
    return True


#: table entries whose distribution says nothing through the hook: gem-tools registers no ``tool:`` id
#: (the reference's ``tool:`` suite has none here), gem-train's plugin is the trainer's (not yet declaring),
#: ``eval:AIME25`` is an id of the reference that gem-envs-math does not register
NOT_DECLARED = {("suite", "tool"), ("command", "train"), ("eval", "AIME25")}


def test_installed_suites_say_through_their_hooks_what_the_fallback_tables_say() -> None:
    """The tables are the fallback for suites that are not installed: for every suite that is, its own word
    agrees with them (and each suite declares all it registers: :func:`gem.provides.undeclared`)."""
    provides = catalog().provides
    tables = {"suite": ids.SUITE_PACKAGES, "eval": ids.EVAL_PACKAGES, "command": ids.COMMAND_PACKAGES,
              "reference_path": PROVIDERS}
    checked = 0
    for kind, table in tables.items():
        for key, distribution in table.items():
            if (kind, key) in NOT_DECLARED or not _installed(distribution):
                continue
            assert provides.provider(kind, key) == distribution, (kind, key)
            checked += 1
    loaded = {p.distribution for p in catalog().plugins if p.status == "ok"} - {"gem-core", "gem-train"}
    for distribution in sorted(loaded):
        assert undeclared(catalog(), distribution) == [], distribution
    if not loaded:
        pytest.skip("no suite installed")
    assert checked
