"""``gem play`` in a real terminal (a pseudo-terminal): line editing with the arrow keys,
and Ctrl-C ending the game on a fresh line, without a traceback."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

SETUP = (
    "import sys, gem\n"
    "gem.register('test:Count-v0', 'gem.testing.envs:CountEnv', high=100, max_turns=3)\n"
    "from gem.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
PROMPT = b"action> "
LEFT = b"\x1b[D"


def _default_sigint() -> None:
    # a shell's background job (CI started with `&`) ignores SIGINT and its children inherit
    # that; a terminal gives Ctrl-C its default action, so the child gets it back
    signal.signal(signal.SIGINT, signal.SIG_DFL)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")


class Terminal:
    """``gem play`` on the slave side of a pty; we type and read on the master side."""

    def __init__(self, *args: str) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, "TERM": "xterm"}
        self.proc = subprocess.Popen([sys.executable, "-c", SETUP, "play", *args], stdin=slave, stdout=slave,
                                     stderr=slave, env=env, close_fds=True, preexec_fn=_default_sigint)  # fmt: skip
        os.close(slave)
        self.output = b""

    def read_until(self, marker: bytes, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while marker not in self.output:
            assert time.monotonic() < deadline, f"no {marker!r} in {self.output!r}"
            if not self._read(0.5):
                assert self.proc.poll() is None, f"gem play ended early: {self.output!r}"
        return self.output

    def read_to_exit(self, timeout: float = 60) -> bytes:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None or self._read(0.1):
            assert time.monotonic() < deadline, f"gem play did not end: {self.output!r}"
            self._read(0.1)
        return self.output

    def wait_for_exit(self, seconds: float) -> bool:
        """Read until the game ends or ``seconds`` pass without it and without a word of output."""
        deadline = time.monotonic() + seconds
        while self.proc.poll() is None and time.monotonic() < deadline:
            if b"bye" in self.output:  # the first Ctrl-C got through: let it finish
                deadline = time.monotonic() + seconds
            self._read(0.1)
        return self.proc.poll() is not None

    def _read(self, wait: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # the child closed its side
            return False
        self.output += chunk
        return bool(chunk)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        os.close(self.master)


@pytest.fixture
def terminal():
    opened: list[Terminal] = []

    def start(*args: str) -> Terminal:
        opened.append(Terminal(*args))
        return opened[-1]

    yield start
    for term in opened:
        term.close()


def test_arrow_keys_edit_the_move(terminal):
    term = terminal("test:Count-v0", "--seed", "1")  # the number is 18
    term.read_until(PROMPT)
    term.type(b"8" + LEFT + b"1\r")  # typed "8", went back one, inserted "1": the move is 18
    out = term.read_to_exit()
    assert b"Correct!" in out, out  # without line editing the move reads "8\x1b[D1": a format error
    assert term.proc.returncode == 0


def test_ctrl_c_at_the_prompt_ends_on_a_new_line_without_a_traceback(terminal):
    term = terminal("test:Count-v0", "--seed", "1")
    term.read_until(PROMPT)
    term.proc.send_signal(signal.SIGINT)
    # CPython's readline prints the prompt before it waits in select(): a Ctrl-C that lands in
    # between is noted but wakes nothing, and a person presses it again. So does this test, once
    # the first has had time to end the game and has not.
    for _ in range(3):
        if term.wait_for_exit(5):
            break
        term.proc.send_signal(signal.SIGINT)
    out = term.read_to_exit().replace(b"\r\n", b"\n")
    assert out.endswith(b"\nbye\n"), out[-80:]
    assert b"Traceback" not in out and b"KeyboardInterrupt" not in out
    assert term.proc.returncode == 130


def test_ctrl_c_in_a_pipe_ends_the_same_way():
    proc = subprocess.Popen([sys.executable, "-c", SETUP, "play", "test:Count-v0", "--seed", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_default_sigint)  # fmt: skip
    try:
        seen = b""
        while PROMPT not in seen:  # the prompt has no newline: read byte by byte
            byte = proc.stdout.read(1)
            assert byte, f"gem play ended early: {seen!r} {proc.stderr.read()!r}"
            seen += byte
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (seen + rest).endswith(b"action> \nbye\n") and b"Traceback" not in err
    assert proc.returncode == 130
