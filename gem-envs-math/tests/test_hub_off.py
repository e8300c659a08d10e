"""Issue 22: with ``datasets`` installed, a hub-only id fails at once instead of waiting on
the Hugging Face hub, unless the user enabled it (``HF_HUB_OFFLINE=0``).

The "hub" here is a server on 127.0.0.1 that accepts connections and never answers (what a
firewalled hub looks like); before, ``gem.make("math:GSM8K")`` waited on it, with retries.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("datasets")

MAKE = """
import gem
from gem.errors import DataUnavailableError
try:
    gem.make("math:GSM8K")
except DataUnavailableError as error:
    print("UNAVAILABLE", error)
"""


class SilentHub:
    """Accepts connections, counts them, never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                self.connections.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def hub():
    server = SilentHub()
    yield server
    server.close()


def _env(hub: SilentHub, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                                                            "TRANSFORMERS_OFFLINE")}
    return {**env, "HF_ENDPOINT": hub.url, **extra}


def test_hub_only_id_fails_at_once_without_contacting_the_hub(hub: SilentHub, tmp_path) -> None:
    done = subprocess.run([sys.executable, "-c", MAKE], env=_env(hub, HF_HOME=str(tmp_path)), capture_output=True,
                          text=True, timeout=120)
    assert "UNAVAILABLE" in done.stdout, done.stderr[-2000:]
    assert "HF_HUB_OFFLINE=0" in done.stdout
    assert hub.connections == []


def test_the_hub_is_used_when_enabled(hub: SilentHub, tmp_path) -> None:
    process = subprocess.Popen([sys.executable, "-c", MAKE], env=_env(hub, HF_HOME=str(tmp_path), HF_HUB_OFFLINE="0"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not hub.connections and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hub.connections, "HF_HUB_OFFLINE=0 should reach the configured hub"
    finally:
        process.kill()
        process.communicate()
