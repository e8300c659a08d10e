"""The trusted side of a function test: the problem's own test code, run as ``main.py``
in a sandbox of its own, after ``_wire.py``'s source.

It runs the problem's setup (HumanEval's prompt: its imports and helpers such as
``poly``) and then the test (``check(candidate)``, MBPP's asserts) exactly as written,
in a fresh interpreter the agent's program never touches. The names the test takes
from the program (the function under test, MBPP's test objects) are stand-ins here: a
call sends its plain arguments to the program's process and returns the plain value
that comes back, rebuilt from the judge's own types. Comparisons, tolerances, loops,
helper functions and the verdict all happen here.

Protocol (one JSON object a line, relayed by the parent): in ``{"setup", "test",
"entry_point"}``, then the program's ``ready``/``failed`` and its replies; out call
requests, and last ``{"verdict": "pass", "keep": ...}`` or ``{"verdict": "fail", "keep": ..., ...}``.
Then the next test's first line, if any: a resident judge (one process kept for many tests,
:mod:`gem_envs_code.judges`) serves test after test, each in a fresh namespace. ``keep`` is
false when the test left something behind that a later test could see: here, a module the
judge imported because the program named it (the parent then ends this judge).
"""

# encode, decode and NotPlain come from _wire.py, whose source precedes this script's
# ruff: noqa: F821

import builtins
import json
import os
import sys


class ProgramFailed(BaseException):
    """The program broke off the test: not an ``Exception``, so no test code's
    ``except Exception`` can swallow it."""


class NotPlainData(ProgramFailed):
    """The test touched a value that is not plain data."""


def _plain_only(kind):
    return NotPlainData(f"the program returned a {kind}; the tests accept plain data only "
                        "(numbers, strings, lists, dicts, ...)")  # fmt: skip


class Handle:
    """An object that stayed in the program's process: it can be passed back to the
    program's functions, and nothing else."""

    __slots__ = ("kind", "ref")

    def __init__(self, ref, kind):
        self.ref, self.kind = ref, kind

    def __repr__(self):
        return f"<{self.kind} object>"

    def _refuse(self, *args, **kwargs):
        raise _plain_only(self.kind)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = __iter__ = _refuse
    __getattr__ = __getitem__ = __contains__ = __add__ = __sub__ = __mul__ = __call__ = _refuse
    __hash__ = object.__hash__


class Remote:
    """A function (or class) of the program's: calling it calls it there."""

    def __init__(self, ref, label):
        self.ref, self.label = ref, label

    def __call__(self, *args, **kwargs):
        return CHANNEL.call(self.ref, self.label, args, kwargs)

    def __repr__(self):
        return f"<function {self.label} of the program>"


def _outbound(value):
    if type(value) is Handle:
        return {"h": value.ref}
    if type(value) is Remote:
        return value.ref
    raise TypeError(f"a {type(value).__qualname__} cannot be passed to the program's function (plain data only)")


def _inbound(tag, body):
    if tag == "h" and type(body) is list and len(body) == 2 and type(body[0]) is int and type(body[1]) is str:
        return Handle(body, body[1][:200])
    raise ValueError("malformed handle")


class Channel:
    def __init__(self):
        self.input = os.fdopen(os.dup(0), "rb")
        self.output = os.dup(1)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        sys.stdin = open(0, closefd=False)
        self.calls = 0
        self.last = None  # (call text, repr of the value) of the latest call

    def send(self, message):
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")
        while data:
            data = data[os.write(self.output, data):]

    def receive(self):
        line = self.input.readline()
        if not line:
            raise ProgramFailed("the program stopped answering")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError, MemoryError):
            raise ProgramFailed("the program sent a malformed message") from None
        if type(message) is not dict:
            raise ProgramFailed("the program sent a malformed message")
        return message

    def call(self, ref, label, args, kwargs):
        self.calls += 1
        args_sent = [encode(a, _outbound) for a in args]
        kwargs_sent = {"d": [[k, encode(v, _outbound)] for k, v in kwargs.items()]}
        self.send({"id": self.calls, "call": ref, "args": args_sent, "kwargs": kwargs_sent})
        reply = self.receive()
        if reply.get("id") != self.calls:
            raise ProgramFailed("the program answered out of turn")
        shown = f"{label}({', '.join(_shown(a) for a in args)})"
        if "value" in reply:
            try:
                value = decode(reply["value"], _inbound)
            except Exception:
                raise ProgramFailed("the program sent a malformed value") from None
            self.last = (shown, _shown(value))
            return value
        if "raised" in reply:
            raise _remote_exception(reply["raised"], shown)
        if "unsendable" in reply:
            raise _plain_only(str(reply["unsendable"])[:300])
        raise ProgramFailed("the program sent a malformed reply")


def _shown(value, limit=300):
    """``repr(value)`` cut to ``limit``; never raises (a 10**6-digit int has no repr)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError, MemoryError):
        return f"<a {type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _remote_exception(raised, shown):
    """The judge's own exception for one the program raised: the first builtin
    ``Exception`` type in its MRO (so ``except ValueError`` in a test still works);
    anything else (``SystemExit``, ``StopIteration``, no builtin base) breaks the test off."""
    message = str(raised.get("message", ""))[-2000:] if type(raised) is dict else ""
    names = raised.get("types", []) if type(raised) is dict else []
    for name in names if type(names) is list else []:
        kind = getattr(builtins, str(name), None)
        if kind in (StopIteration, StopAsyncIteration):
            break  # raised into a test's ``for x in map(candidate, ...)`` it would end the loop quietly
        if isinstance(kind, type) and issubclass(kind, Exception):
            try:
                return kind(message)
            except Exception:  # a type whose constructor wants more (UnicodeDecodeError)
                return Exception(f"{name}: {message}")
    return ProgramFailed(f"{shown} raised {message.splitlines()[-1] if message else 'an exception'}")


def _failing_assert(test, exc):
    """The source of the assert of ``test`` that ``exc`` came out of, or None."""
    import ast
    import traceback

    line = None
    for entry, lineno in traceback.walk_tb(exc.__traceback__):
        if entry.f_code.co_filename == "test.py":
            line = lineno
    if line is None:
        return None
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.Assert) and n.lineno <= line <= n.end_lineno), None)
    if node is None:
        lines = test.splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else None
    return (ast.get_source_segment(test, node) or "")[:2000]


def _error_text(exc):
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename not in (__file__, "main.py")]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()[-2000:]


def _bind(namespace, ready, entry):
    """Give the test the program's names it uses that the trusted setup does not define."""
    for name, info in ready.items():
        if type(name) is not str or type(info) is not dict:
            raise ProgramFailed("the program sent a malformed message")
        if name != entry and (name in namespace or hasattr(builtins, name)):
            continue  # the setup's helpers and the builtins are the judge's own
        if "callable" in info:
            namespace[name] = Remote({"n": name}, name)
        elif "module" in info and name != entry:
            import importlib

            global KEEP
            module = str(info["module"])
            KEEP = KEEP and module in sys.modules  # an import the program chose stays in this process
            try:
                namespace[name] = importlib.import_module(module)
            except Exception:  # a module of the program's own: the test cannot use it
                continue
        elif "value" in info and name != entry:
            try:
                namespace[name] = decode(info["value"], _inbound)
            except Exception:
                raise ProgramFailed("the program sent a malformed value") from None
        elif "unsendable" in info and name != entry:
            namespace[name] = Handle([-1, ""], str(info["unsendable"])[:200])


#: False once a test left state behind (see the protocol above)
KEEP = True


def main():
    global CHANNEL, KEEP
    CHANNEL = channel = Channel()
    while True:  # one test per first line: a cold judge gets one, a resident one many
        line = channel.input.readline()
        if not line:
            return
        channel.calls, channel.last, KEEP = 0, None, True
        judge(channel, json.loads(line))


def judge(channel, job):
    entry = job.get("entry_point")

    def verdict(ok, **detail):
        channel.send({"verdict": "pass", "keep": KEEP} if ok else {"verdict": "fail", "keep": KEEP, **detail})

    try:
        first = channel.receive()
    except ProgramFailed as exc:
        verdict(False, phase="test", error="ProgramFailed", message=str(exc))
        return
    if "failed" in first:
        detail = first["failed"] if type(first["failed"]) is dict else {}
        verdict(False, **{k: str(detail.get(k, ""))[:2000] for k in ("phase", "error", "message")})
        return
    ready = first.get("ready")
    if type(ready) is not dict:
        verdict(False, phase="test", error="ProgramFailed", message="the program sent a malformed message")
        return
    if entry and "callable" not in ready.get(entry, {}):
        verdict(False, phase="program", error="NameError",
                message=f"the program does not define a function named {entry!r}")  # fmt: skip
        return
    namespace = {"__name__": "__test__", "__builtins__": builtins}
    test = job["test"]
    try:
        exec(compile(job["setup"], "setup.py", "exec"), namespace)
        _bind(namespace, ready, entry)
        exec(compile(test, "test.py", "exec"), namespace)
    except BaseException as exc:
        source = _failing_assert(test, exc)
        actual = channel.last[1] if channel.last and isinstance(exc, AssertionError) else None
        verdict(False, phase="test", error=type(exc).__name__, message=_error_text(exc), test=source, actual=actual)
        return
    verdict(True)


main()
