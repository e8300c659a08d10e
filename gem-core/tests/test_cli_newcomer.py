"""What a newcomer meets first: pipes, typos, the play loop, help texts, check_env's report."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import gem
from gem.testing import CheckEnvError, check_env

SETUP = (
    "import sys, gem\n"
    "gem.register('test:Count-v0', 'gem.testing.envs:CountEnv', high=100, max_turns=3)\n"
    "gem.register('test:Count-v0-one', 'gem.testing.envs:CountEnv', high=100, max_turns=1)\n"
    "for i in range(300):\n"
    "    gem.register(f'test:Many{i}-v0', 'gem.testing.envs:CountEnv')\n"
    "from gem.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def gem_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SETUP, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_a_reader_that_stops_early_gets_no_traceback():
    # `gem list | head -2`: the reader closes the pipe before gem has written everything
    proc = subprocess.Popen([sys.executable, "-c", SETUP, "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert proc.returncode in (0, 141)


def test_a_typo_gets_did_you_mean_in_sentences_of_their_own():
    info = gem_cli("info", "test:Cuont-v0")
    assert info.returncode == 1
    lines = info.stderr.strip().splitlines()
    assert lines[0].startswith("gem info: No env 'test:Cuont-v0'. Did you mean 'test:Count-v0', ")
    assert lines[-1] == "`gem list` shows every id."


def test_a_missing_suite_says_how_to_install_it_from_this_tree(gem_registry):
    with pytest.raises(gem.errors.SuiteNotInstalledError) as info:
        gem.make("game:Sudoku-v0")
    assert str(info.value).endswith("from the root of a clone of the GEM repository: "
                                    "pip install -e gem-core -e gem-envs-games.")


def test_info_shows_strings_as_the_env_reads_them():
    info = gem_cli("info", "test:Count-v0", "--seed", "0")
    assert info.returncode == 0, info.stderr
    assert "a random action: '\\boxed{" in info.stdout and "\\\\boxed" not in info.stdout


def test_play_reprompts_on_an_empty_line_and_counts_turns_in_english():
    result = gem_cli("play", "test:Count-v0-one", "--seed", "1", stdin="\n   \n\\boxed{50}\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.count("(type a move") == 2 and "[turn 1] action>" in out and "[turn 2]" not in out
    assert "after 1 turn," in out and "-0.100" not in out


class Coin(gem.Env):
    """The root README's example, as written there."""

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.side = self.rng.choice(["heads", "tails"])
        return "Heads or tails?", {}

    def step(self, action):
        won = action.strip().lower() == self.side
        return "", float(won), True, False, {"correct": won}


def test_check_env_passes_the_readme_coin_with_notes_on_what_is_optional():
    report = check_env(Coin())
    assert report.ok
    statuses = {r.name: r.status for r in report.results}
    assert statuses["state"] == "skipped" and statuses["api"] == statuses["determinism"] == "passed"
    assert "sample_random_action() is not implemented" in str(report)
    assert "skip  state: get_state() is not implemented" in str(report)


def test_check_env_strict_requires_the_optional_capabilities_in_a_readable_report():
    with pytest.raises(CheckEnvError) as info:
        check_env(Coin(), strict=True)
    text = str(info.value)
    assert text.startswith("check_env report for <Coin>: 2 failed")
    assert "FAIL  check_env[state]" in text and "FAIL  check_env[api]" in text and "ok    robustness" in text
    assert {r.name for r in info.value.report.failed} == {"api", "state"}


def test_check_env_reports_every_failing_check_not_only_the_first():
    class Fragile(Coin):
        def step(self, action):
            if "{" in action:
                raise ValueError("boom")
            return super().step(action)

        def sample_random_action(self):
            return "heads"

    with pytest.raises(CheckEnvError) as info:
        check_env(Fragile())
    failed = {r.name for r in info.value.report.failed}
    assert failed == {"robustness"} and "raised ValueError: boom" in str(info.value)


def test_the_root_readme_coin_block_itself_passes_check_env(gem_registry):
    from pathlib import Path

    readme = Path(__file__).resolve().parents[2] / "README.md"
    if not readme.exists():
        pytest.skip("run from outside the repository")
    text = readme.read_text(encoding="utf-8")
    block = text[text.index("class Coin(gem.Env):"):]
    exec(block[: block.index("```")], {"gem": gem})  # defines Coin and registers mine:Coin-v0
    assert check_env(gem.make("mine:Coin-v0")).ok


def test_no_readme_tells_you_to_pip_install_a_package_the_registry_does_not_have():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readmes = [root / "README.md", *root.glob("gem-*/README.md"), *root.glob("examples/*/README.md")]
    if not readmes[0].exists():
        pytest.skip("run from outside the repository")
    # our packages install from a clone (pip install -e gem-...), never by name from PyPI
    by_name = re.compile(r"pip install (?:-U )?['\"]?gem-(?:core|envs|tools|train|evals|integrations)")
    offenders = [f"{p.relative_to(root)}:{n}" for p in readmes for n, line in enumerate(p.read_text().splitlines(), 1)
                 if by_name.search(line)]
    assert offenders == []


def _without_distribution(monkeypatch, missing):
    from importlib import metadata

    real = metadata.distribution

    def distribution(name):
        if name == missing:
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "distribution", distribution)


def test_a_command_of_a_package_not_installed_names_the_package_in_one_line(gem_catalog, monkeypatch, capsys):
    from gem.cli import main

    _without_distribution(monkeypatch, "gem-tools")  # gem-core alone: gem-tools provides `gem sandbox`
    assert main(["sandbox"]) == 2
    err = capsys.readouterr().err
    assert err == ("gem: gem sandbox is provided by gem-tools; install it from the root of a clone of the GEM "
                   "repository: pip install -e gem-core -e 'gem-tools[all]'\n")
    _without_distribution(monkeypatch, "gem-train")
    assert main(["train", "algo=grpo"]) == 2
    assert "gem train is provided by gem-train; install it" in capsys.readouterr().err


def test_a_command_whose_plugin_is_switched_off_says_so_and_a_typo_finds_it():
    script = "import sys; from gem.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**__import__("os").environ, "GEM_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = subprocess.run([sys.executable, "-c", script, "sandbox"], capture_output=True, text=True, timeout=60,
                            env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("gem: gem sandbox is provided by gem-tools")
    typo = subprocess.run([sys.executable, "-c", script, "sandbx"], capture_output=True, text=True, timeout=60,
                          env=env)
    assert typo.returncode == 2 and "Did you mean 'sandbox'?" in typo.stderr


def test_python_dash_m_gem_is_the_gem_command():
    """Issue 34, point 6: `python -m gem` did not work (gem had no __main__), where users of pip, pytest and
    nox expect it to."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "gem", "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gem-core ")
    done = subprocess.run([sys.executable, "-m", "gem", "info", "test:Nope-v0"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr
