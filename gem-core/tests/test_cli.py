"""The gem CLI, run as a newcomer would run it (a subprocess per command)."""

import subprocess
import sys
from pathlib import Path

GEM = str(Path(sys.executable).parent / "gem")
SETUP = (
    "import sys, gem\n"
    "gem.register('test:Count-v0', 'gem.testing.envs:CountEnv', high=100, max_turns=3)\n"
    "from gem.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def gem_cli(*args, stdin=None):
    """Run the CLI with the test env registered (as a user script would register it)."""
    return subprocess.run([sys.executable, "-c", SETUP, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_help_lists_commands():
    out = subprocess.run([GEM, "--help"], capture_output=True, text=True, check=True).stdout
    for command in ("list", "info", "plugins", "play"):
        assert f"  {command}" in out


def test_unknown_command_suggests():
    result = subprocess.run([GEM, "lsit"], capture_output=True, text=True)
    assert result.returncode == 2 and "Did you mean 'list'?" in result.stderr


def test_list_and_info():
    listed = gem_cli("list", "Count")
    assert "test:Count-v0" in listed.stdout
    info = gem_cli("info", "test:Count-v0", "--seed", "3")
    assert info.returncode == 0, info.stderr
    assert "high = 100" in info.stdout and "Guess a number between 1 and 100" in info.stdout


def test_info_on_a_typo_says_did_you_mean():
    info = gem_cli("info", "test:Cuont-v0")
    assert info.returncode == 1 and "Did you mean 'test:Count-v0'?" in info.stderr


def test_play_reads_actions_from_the_terminal():
    result = gem_cli("play", "test:Count-v0", "--seed", "1", stdin="\\boxed{50}\n:random\nnonsense\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Guess a number between 1 and 100" in out
    assert "Wrong, go" in out and "(random action: \\boxed{" in out
    assert "episode over" in out


def test_plugins_lists_core():
    out = subprocess.run([GEM, "plugins"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[1].startswith("core") and "gem-core" in out


def test_play_boxes_a_bare_move_when_the_env_asks_for_boxed_answers():
    result = gem_cli("play", "test:Count-v0", "--seed", "1", stdin="18\n")
    assert "sent as \\boxed{move}" in result.stdout and "Correct!" in result.stdout
    raw = gem_cli("play", "test:Count-v0", "--seed", "1", "--box", "never", stdin="18\n")
    assert "Format error" in raw.stdout
