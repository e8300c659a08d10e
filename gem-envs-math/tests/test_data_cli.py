from __future__ import annotations

import subprocess
import sys

from gem_envs_math import data


def test_gem_math_data_status_names_each_package() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from gem.cli import main; raise SystemExit(main(['math-data', '--status']))"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    for distribution in data.DATA_PACKAGES:
        assert distribution in out.stdout
        assert data.where(distribution) in out.stdout
