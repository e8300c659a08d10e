"""`gem play` runs the terminal env: you type the commands, see their output and the final check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_gem_play_the_terminal_env():
    moves = "<bash>echo hello-from-play; ls</bash>\n<finish></finish>\n"
    out = subprocess.run([str(Path(sys.executable).with_name("gem")), "play", "terminal:Shell-v0-files", "--seed", "0"],
                         input=moves, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "You are in a Linux shell" in out.stdout and "<bash_output>hello-from-play" in out.stdout
    assert "The workspace was checked: score 0.00" in out.stdout and "episode over (terminated)" in out.stdout
