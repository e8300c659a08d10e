"""`gem serve` where OpenEnv cannot be imported: one line naming the install command, no traceback.

OpenEnv may be installed in the venv running this, so each run makes it unimportable first
(None in sys.modules makes every import of it fail, as if the package were absent).
"""

import subprocess
import sys

import pytest

NO_OPENENV = "import sys; sys.modules['openenv'] = None; from gem.cli import main; sys.exit(main())"


@pytest.mark.parametrize("args", [[], ["--help"], ["game:GuessTheNumber-v0-hard", "--port", "0"]],
                         ids=["bare", "help", "env-id"])
def test_gem_serve_without_openenv_names_the_install_command_in_one_line(args):
    result = subprocess.run([sys.executable, "-c", NO_OPENENV, "serve", *args], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("gem serve needs OpenEnv")
    assert "pip install -e gem-core -e 'gem-integrations[serve]'" in result.stderr
