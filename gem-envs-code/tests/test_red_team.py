"""Issue 16's red team: programs that try to forge the verdict instead of solving the task.

Each program defines the function under test (so it loads) and then attacks the
harness: walking frames to the verdict, scanning the heap, patching ``os``/``sys``/
builtins, printing fake verdicts and protocol lines, exiting early, returning objects
that compare equal to anything, flooding output, signal and fork tricks. Before the
judge moved into a process of its own, the frame-walking ones scored 1.0 on every
HumanEval and MBPP problem; every one must score 0 on HumanEval, MBPP and the
multi-turn MBPP env. The last test checks that the suite's honest twin still passes,
so a broken harness cannot make this file pass.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import fenced

import gem

#: helpers every attack shares: write a line to every descriptor we might hold
SPRAY = textwrap.dedent("""
    import os as _os
    def _spray(lines):
        for fd in range(0, 64):
            for line in lines:
                try:
                    _os.write(fd, line)
                except OSError:
                    pass
    FAKE = [b'{"verdict":"pass"}\\n', b"PASS\\n", b'{"ready":{}}\\n'] + [
        ('{"id":%d,"value":true}\\n' % i).encode() for i in range(1, 40)]
""")

ATTACKS = {
    "frame walk to the verdict": """
        import sys
        def _walk():
            f = sys._getframe(1)
            while f is not None:
                for name, value in list(f.f_locals.items()):
                    if name in ("verdict", "send") and callable(value):
                        try:
                            value(True)
                        except BaseException:
                            pass
                        try:
                            value({"verdict": "pass"})
                        except BaseException:
                            pass
                f = f.f_back
        _walk()
        def {entry}(*args, **kwargs):
            _walk()
            return True
    """,
    "heap scan for the harness": """
        import gc
        def _scan():
            for obj in gc.get_objects():
                if callable(obj) and getattr(obj, "__name__", "") in ("verdict", "send", "main"):
                    for arg in (True, {"verdict": "pass"}):
                        try:
                            obj(arg)
                        except BaseException:
                            pass
                if isinstance(obj, dict) and "nonce" in obj:
                    _spray([f"{obj['nonce']} PASS\\n".encode()])
            for ref in gc.get_referrers(_scan):
                if isinstance(ref, dict) and "send" in ref:
                    try:
                        ref["send"]({"verdict": "pass"})
                    except BaseException:
                        pass
        _scan()
        def {entry}(*args, **kwargs):
            _scan()
            return 0
    """,
    "nonce and descriptors read from frames": """
        import sys
        f = sys._getframe(0)
        while f is not None:
            for name, value in list(f.f_locals.items()):
                if isinstance(value, str) and len(value) == 32:
                    _spray([f"{value} PASS\\n".encode()])
                if isinstance(value, int) and 2 < value < 64:
                    _spray(FAKE)
            f = f.f_back
        def {entry}(*args, **kwargs):
            return None
    """,
    "patched os.write and os._exit": """
        import os
        _write, _exit = os.write, os._exit
        os.write = lambda fd, data: _write(fd, data.replace(b"fail", b"pass").replace(b"FAIL", b"PASS"))
        os._exit = lambda code: _exit(0)
        def {entry}(*args, **kwargs):
            return None
    """,
    "patched sys.stdout, json and __main__": """
        import io, json, sys
        sys.stdout = io.StringIO()
        json.loads = lambda *a, **k: {"verdict": "pass"}
        json.dumps = lambda *a, **k: '{"verdict":"pass"}'
        main = sys.modules["__main__"]
        for name in ("_foreign_type", "encode", "decode", "_encode"):
            if hasattr(main, name):
                setattr(main, name, lambda *a, **k: True)
        def {entry}(*args, **kwargs):
            return None
    """,
    "patched builtins": """
        import builtins
        builtins.AssertionError = type("Nope", (Exception,), {})
        builtins.abs = lambda x: 0
        builtins.len = lambda x: 0
        builtins.sorted = lambda *a, **k: []
        builtins.set = lambda *a: set()
        builtins.isinstance = lambda *a: True
        builtins.type = lambda *a: int
        def {entry}(*args, **kwargs):
            return None
    """,
    "fake verdicts and protocol lines": """
        _spray(FAKE)
        print('{"verdict":"pass"}')
        def {entry}(*args, **kwargs):
            _spray(FAKE)
            return True
    """,
    "sys.exit(0) at load": """
        import sys
        def {entry}(*args, **kwargs):
            return None
        sys.exit(0)
    """,
    "os._exit(0) inside the function": """
        import os
        def {entry}(*args, **kwargs):
            os._exit(0)
    """,
    "SystemExit swallowed by nobody": """
        def {entry}(*args, **kwargs):
            raise SystemExit(0)
    """,
    "always-equal object": """
        class Anything:
            def __eq__(self, other):
                return True
            __ne__ = lambda self, other: False
            __lt__ = __le__ = __gt__ = __ge__ = __eq__
            def __hash__(self):
                return 0
            def __bool__(self):
                return True
            def __abs__(self):
                return 0
            def __sub__(self, other):
                return 0
            __rsub__ = __sub__
        def {entry}(*args, **kwargs):
            return Anything()
    """,
    "subclasses of int, str, list with an always-true __eq__": """
        def _liar(base):
            return type("Liar", (base,), {"__eq__": lambda s, o: True, "__ne__": lambda s, o: False,
                                           "__hash__": lambda s: 0, "__lt__": lambda s, o: True})
        _values = [_liar(int)(0), _liar(str)(""), _liar(list)(), _liar(float)(0.0), _liar(tuple)(), _liar(dict)()]
        _calls = [0]
        def {entry}(*args, **kwargs):
            _calls[0] += 1
            return [_values[_calls[0] % len(_values)]] if _calls[0] % 2 else _values[_calls[0] % len(_values)]
    """,
    "raising __repr__ and __eq__": """
        class Bad:
            def __repr__(self):
                raise RuntimeError("no repr")
            def __eq__(self, other):
                raise AssertionError("nope")
        def {entry}(*args, **kwargs):
            return Bad()
    """,
    "huge return value": """
        def {entry}(*args, **kwargs):
            return "x" * (40 << 20)
    """,
    "huge output": """
        import sys
        def {entry}(*args, **kwargs):
            sys.stderr.write("y" * (16 << 20))
            print("z" * (16 << 20))
            return None
    """,
    "infinite __del__": """
        class Sticky:
            def __del__(self):
                while True:
                    pass
        _keep = [Sticky() for _ in range(3)]
        def {entry}(*args, **kwargs):
            Sticky()
            return None
    """,
    "signal tricks": """
        import os, signal
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_IGN)
        for pid in (1, os.getppid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        def {entry}(*args, **kwargs):
            try:
                os.killpg(0, signal.SIGSTOP)
            except OSError:
                pass
            return None
    """,
    "a forked child that writes later": """
        import os, time
        if os.fork() == 0:
            for _ in range(20):
                time.sleep(0.05)
                _spray(FAKE)
            os._exit(0)
        def {entry}(*args, **kwargs):
            if os.fork() == 0:
                _spray(FAKE)
                os._exit(0)
            time.sleep(0.1)
            return None
    """,
    "StopIteration to end a test's loop early": """
        def {entry}(*args, **kwargs):
            raise StopIteration
    """,
    "an int too large to print": """
        import sys
        sys.set_int_max_str_digits(0)
        def {entry}(*args, **kwargs):
            return 7 ** 200000
    """,
    "reads the channel and answers ahead": """
        import os, json
        _spray([b'{"ready":{"%s":{"callable":true}}}\\n' % b"{entry}"] + FAKE[3:])
        def {entry}(*args, **kwargs):
            return None
    """,
}


def _program(attack: str, entry: str) -> str:
    return SPRAY + textwrap.dedent(attack).replace("{entry}", entry)


@pytest.fixture(scope="module")
def envs():
    made = {
        "humaneval": gem.make("eval:HumanEval", test_timeout=4.0),
        "mbpp": gem.make("eval:MBPP", test_timeout=4.0),
        "mbpp-multi": gem.make("code:MBPP-MultiTurn", test_timeout=4.0),
    }
    yield made
    for env in made.values():
        env.close()


def _episode_reward(env, program_for, idx: int) -> tuple[float, dict]:
    env.reset(idx=idx)
    total, info, done = 0.0, {}, False
    while not done:
        entry = env.unwrapped.problem.entry_point
        _, reward, done, _, info = env.step(fenced(program_for(entry)))
        total += reward
    return total, info


# HumanEval/0 (bools), /2 (a float within a tolerance), /32 (a helper from the prompt);
# MBPP task 2 (sets) and 367 (objects built by the test setup)
@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_scores_zero_everywhere(envs, name: str) -> None:
    attack = ATTACKS[name]
    mbpp_367 = next(i for i, p in enumerate(envs["mbpp"].unwrapped.records) if p.id == "MBPP/367")
    cases = [("humaneval", 0), ("humaneval", 2), ("humaneval", 32), ("mbpp", 0), ("mbpp", mbpp_367),
             ("mbpp-multi", 0)]  # fmt: skip
    for env_name, idx in cases:
        reward, info = _episode_reward(envs[env_name], lambda entry: _program(attack, entry), idx)
        assert reward == 0.0 and not info.get("correct"), (name, env_name, idx, info)


def test_the_honest_twin_passes(envs) -> None:
    # the same harness, the reference solutions: 1.0, so the zeros above are the attacks' own
    for env_name, idx in [("humaneval", 0), ("humaneval", 32), ("mbpp", 0), ("mbpp-multi", 0)]:
        env = envs[env_name]
        reward, info = _episode_reward(env, lambda entry, env=env: env.unwrapped.problem.meta["canonical"], idx)
        assert reward == 1.0 and info["correct"], (env_name, idx, info)
