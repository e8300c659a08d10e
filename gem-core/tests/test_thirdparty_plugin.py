"""A real third-party plugin package, pip-installed into this venv, found by id."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


def _run(*args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory):
    src = tmp_path_factory.mktemp("plugin") / "pkg"
    shutil.copytree(HERE / "thirdparty_plugin", src)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", str(src)]
    result = _run(*pip)
    assert result.returncode == 0, result.stderr
    yield
    _run(sys.executable, "-m", "pip", "uninstall", "--yes", "gem-example-plugin")


def test_env_is_makeable_by_id_with_no_import_in_user_code(installed_plugin):
    code = (
        "import gem\n"
        "env = gem.make('example:Reverse-v0')\n"
        "obs, _ = env.reset(seed=1)\n"
        "word = obs.split(': ')[1]\n"
        "print(env.step(word[::-1])[1], env.spec.source)\n"
    )
    result = _run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1.0", "gem-example-plugin"]


def test_gem_list_and_plugins_show_it(installed_plugin):
    listed = _run(str(BIN / "gem"), "list", "example")
    assert listed.returncode == 0, listed.stderr
    assert "example:Reverse-v0" in listed.stdout and "gem-example-plugin" in listed.stdout
    plugins = _run(str(BIN / "gem"), "plugins")
    line = next(row for row in plugins.stdout.splitlines() if row.startswith("example"))
    assert "gem-example-plugin" in line and "1.2.3" in line and "ok" in line and "1 envs" in line


def test_plugin_adds_a_cli_command_and_passes_check_env(installed_plugin):
    hello = _run(str(BIN / "gem"), "example-hello", "world")
    assert hello.stdout.strip() == "hello from gem-example-plugin world"
    code = "import gem; from gem.testing import check_env; check_env(gem.make('example:Reverse-v0')); print('ok')"
    assert _run(sys.executable, "-c", code).stdout.strip() == "ok"


def test_blocking_the_plugin_hides_its_envs(installed_plugin):
    import os

    env = {**os.environ, "GEM_BLOCKED_PLUGINS": "example"}
    result = _run(str(BIN / "gem"), "info", "example:Reverse-v0", env=env)
    assert result.returncode == 1 and "No env 'example:Reverse-v0'" in result.stderr
