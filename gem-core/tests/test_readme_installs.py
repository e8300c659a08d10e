"""Every ``pip install`` line of the READMEs works on its own from the root of a clone.

Our packages are not on a registry, so a line that installs a package from its folder
must name the folders of every package of ours it depends on: ``pip install -e
gem-envs-games`` alone ends in "No matching distribution found for gem-core". One row is
also installed for real, in a fresh venv.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
READMES = sorted(p for p in [ROOT / "README.md", *ROOT.glob("*/README.md"), *ROOT.glob("examples/*/README.md")]
                 if p.is_file())
_INLINE = re.compile(r"`([^`\n]*pip install[^`\n]*)`")
_NAME = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?$")


def _commands_in_context(text: str) -> list[tuple[str, str]]:
    """Each ``pip install`` command of a README (in code blocks, and in inline code), with
    what runs before it: the code block so far, or the inline code before it on its line."""
    found: list[tuple[str, str]] = []
    in_block, block = False, ""
    for line in text.replace("\\\n", " ").splitlines():  # shell line continuations joined
        if line.lstrip().startswith("```"):
            in_block, block = not in_block, ""
            continue
        pieces = [line.split(" #", 1)[0]] if in_block else _INLINE.findall(line)
        before = block if in_block else ""
        for piece in pieces:
            for part in re.split(r"&&|;", piece):
                if "pip install" in part:
                    found.append((part.strip(), before))
                before += part + "\n"
        block += line + "\n" if in_block else ""
    return found


def _commands(text: str) -> list[str]:
    return [command for command, _ in _commands_in_context(text)]


def _local_installs(command: str) -> dict[str, set[str]]:
    """The packages of this tree that ``command`` installs from their folders, with extras."""
    words = shlex.split(command)
    out: dict[str, set[str]] = {}
    for word in words[words.index("install") + 1:]:
        match = _NAME.match(word.rstrip("/"))
        if match and (ROOT / match.group(1) / "pyproject.toml").is_file():
            extras = {e.strip() for e in (match.group(2) or "").split(",") if e.strip()}
            out.setdefault(match.group(1), set()).update(extras)
    return out


def _ours(requirements: list[str]) -> dict[str, set[str]]:
    needed: dict[str, set[str]] = {}
    for requirement in requirements:
        match = re.match(r"^(gem-[a-z-]+)(?:\[([^\]]*)\])?", requirement)
        if match and (ROOT / match.group(1) / "pyproject.toml").is_file():
            needed.setdefault(match.group(1), set()).update(e for e in (match.group(2) or "").split(",") if e)
    return needed


def _needs(package: str, extras: set[str]) -> set[str]:
    """Our packages that installing ``package[extras]`` needs, itself included."""
    project = tomllib.loads((ROOT / package / "pyproject.toml").read_text())["project"]
    requirements = list(project.get("dependencies", []))
    for extra in extras:
        requirements += project.get("optional-dependencies", {}).get(extra, [])
    needed = {package}
    for name, sub in _ours(requirements).items():
        if name != package:
            needed |= _needs(name, sub)
        else:  # an extra naming its own package's other extras (gem-tools[all])
            needed |= _needs(name, sub - extras) if sub - extras else set()
    return needed


def test_readmes_have_install_lines() -> None:
    assert sum(len(_commands(p.read_text())) for p in READMES) > 10


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_install_line_names_the_packages_it_needs(readme: Path) -> None:
    problems = []
    for command in _commands(readme.read_text()):
        installs = _local_installs(command)
        named = set(installs)
        for package, extras in installs.items():
            missing = _needs(package, extras) - named
            if missing:
                problems.append(f"{command!r} needs {', '.join(sorted(missing))} too")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_torch_is_pinned_before_gem_train(readme: Path) -> None:
    """A bare torch requirement pulls a CUDA build of several GB; the CPU build is pinned first."""
    late = [command for command, before in _commands_in_context(readme.read_text())
            if "gem-train" in _local_installs(command) and "torch==" not in before + command]
    assert not late, f"install torch first (pip install torch==2.13.0) before: {late}"


def test_the_parser_catches_a_lone_suite() -> None:
    installs = _local_installs("pip install -e gem-envs-qa")
    assert _needs("gem-envs-qa", installs["gem-envs-qa"]) == {"gem-envs-qa", "gem-core", "gem-tools"}


@pytest.mark.skipif(os.environ.get("GEM_SKIP_NETWORK_TESTS") == "1", reason="needs the package registry")
def test_a_package_row_installs_in_a_fresh_venv(tmp_path: Path) -> None:
    """The root README's gem-envs-multi row, run as written (its only other dependency is
    gem-core, so the install is small), then the suite's envs load."""
    row = next(c for c in _commands((ROOT / "README.md").read_text()) if "gem-envs-multi" in c)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = shlex.split(row)
    assert pip[:2] == ["pip", "install"]
    done = subprocess.run([str(venv / "bin" / "python"), "-m", *pip, "-q"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    check = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import gem; print(len(gem.list_envs('multi:')) > 0)"],
                           capture_output=True, text=True, timeout=120)
    assert check.stdout.strip() == "True", check.stderr[-2000:]


def _table_lines() -> dict[str, str]:
    """The install cell's command of each row of the root README's package table."""
    rows = re.findall(r"^\| \[`(gem-[a-z-]+)`\]\([^)]*\) \| `([^`]+)`", (ROOT / "README.md").read_text(), re.M)
    return dict(rows)


def test_install_hints_are_the_readme_table_lines() -> None:
    """What gem prints at the moment of need (a missing suite, `gem train` without gem-train) is the
    README's working line, never a line that pulls CUDA torch or fails on a missing sibling."""
    from gem.errors import INSTALL_LINES, SuiteNotInstalledError, install_hint
    from gem.registry import EnvRegistry

    table = _table_lines()
    assert set(table) == set(INSTALL_LINES), "every package has a row and a hint"
    for package, line in INSTALL_LINES.items():
        assert table[package] == line
        assert install_hint(package).endswith(line)
    assert "torch==2.13.0 &&" in install_hint("gem-train")
    with pytest.raises(SuiteNotInstalledError, match=re.escape(INSTALL_LINES["gem-envs-games"])):
        EnvRegistry().spec("game:Sudoku-v0")  # an empty registry: the games suite is not installed


@pytest.mark.skipif(os.environ.get("GEM_SKIP_NETWORK_TESTS") == "1", reason="needs the package registry")
def test_a_printed_hint_installs_in_a_fresh_venv(tmp_path: Path) -> None:
    """The hint for a missing code suite, run as printed: it used to be `pip install -e gem-envs-code`,
    which fails with "No matching distribution found for gem-tools"."""
    from gem.errors import install_hint

    command = install_hint("gem-envs-code").split(": ", 1)[1]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = shlex.split(command)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", *pip, "-q"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import gem_envs_code, gem_tools; print('ok')"],
                           capture_output=True, text=True, timeout=120)
    assert check.stdout.strip() == "ok", check.stderr[-2000:]
