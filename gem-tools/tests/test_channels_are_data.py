"""What crosses from an isolated process to a trusted one is data, never code (issue 33): each channel from a
less trusted process, sent a pickle with a crafted ``__reduce__`` and a pickle bomb, runs nothing and fails only
the run or job it belongs to. The grading workers' channel has its own tests (gem-envs-math's
test_grading_integrity.py); the code judge's in gem-envs-code; the verifiers bridge's is HTTP with JSON bodies."""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gem_tools.sandbox.warm import Zygote, ZygoteLost


class _RunsOnLoad:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return os.mkdir, (self.path,)


def _payloads(marker: Path) -> list[bytes]:
    return [pickle.dumps(_RunsOnLoad(str(marker))), b"(l" * 2000 + b"."]


@pytest.mark.parametrize("which", [0, 1])
def test_a_zygote_that_sends_a_pickle_is_lost_and_nothing_runs(tmp_path, which):
    """The zygote's messages are JSON (warm.py Zygote.recv): a pickle from a subverted zygote is garbage."""
    marker = tmp_path / "ran-in-the-host"
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    zygote = Zygote(sleeper, ours, os.memfd_create("stderr"), None, None)
    try:
        theirs.send(_payloads(marker)[which])
        with pytest.raises(ZygoteLost, match="garbage"):
            asyncio.run(zygote.recv(5.0))
        assert not marker.exists()
    finally:
        zygote.destroy()
        theirs.close()


def test_the_code_judges_wire_decodes_data_only(tmp_path):
    """A program's reply to its judge is a JSON line decoded by gem_envs_code._wire: a pickle is malformed."""
    wire = pytest.importorskip("gem_envs_code._wire")
    import json

    marker = tmp_path / "ran-in-the-host"
    for payload in _payloads(marker):
        with pytest.raises(ValueError):
            json.loads(payload)  # the judge's receive(): not JSON, so "the program sent a malformed message"
        with pytest.raises(ValueError):
            wire.decode({"b": payload.decode("latin-1")})  # bytes only as validated base64
        with pytest.raises(ValueError):
            wire.decode({"p": list(payload)})  # no tag that rebuilds an object from its pickle
    assert not marker.exists()
