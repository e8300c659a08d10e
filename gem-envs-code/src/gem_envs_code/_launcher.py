"""The harness of one function test, run as ``main.py`` inside the sandbox.

Not imported by gem_envs_code: its source is the program the sandbox runs. It reads
its job from stdin (setup code, the agent's program, one test, the entry point and a
per-run nonce, as ``marshal`` data), runs them, and reports on a private copy of
stdout: ``<nonce> PASS`` or ``<nonce> FAIL <repr of a dict of strings>``. Without the nonce a program cannot claim a
pass, so exiting early (``sys.exit(0)``, ``os._exit(0)``) fails. The test runs with a
copy of the builtins taken before the program ran, and the function under test may
only return plain data, so objects whose ``__eq__`` always says yes fail too.

It starts once per test, so it imports little: ``ast`` and ``traceback`` only when a
test fails, and no ``json`` (``marshal`` is built in).
"""

import builtins
import collections
import marshal
import os
import sys

_PLAIN = {int, float, complex, str, bytes, bool, type(None), list, tuple, dict, set, frozenset}
# collections' types compare like plain data; their methods are Python-level and could be
# monkeypatched, so they count only while their comparisons are the originals
_STDLIB = (collections.Counter, collections.OrderedDict, collections.defaultdict, collections.deque)
_STDLIB_EQ = {t: (t.__eq__, t.__ne__) for t in _STDLIB}
_BUILTINS = dict(vars(builtins))
# the harness looks builtins up in its own globals, so a program that reassigns
# ``builtins.type`` or ``builtins.repr`` does not change how the harness judges it
globals().update({k: v for k, v in _BUILTINS.items() if not k.startswith("__")})


def _foreign_type(value, depth=0):
    """The first type in ``value`` that is not plain data, or None."""
    kind = type(value)
    if kind not in _PLAIN and (kind not in _STDLIB_EQ or (kind.__eq__, kind.__ne__) != _STDLIB_EQ[kind]):
        return kind
    if depth > 200:
        return None
    if kind in (dict, collections.Counter, collections.OrderedDict, collections.defaultdict):
        items = [x for pair in value.items() for x in pair]
    elif kind in (list, tuple, set, frozenset, collections.deque):
        items = value
    else:
        return None
    for item in items:
        found = _foreign_type(item, depth + 1)
        if found is not None:
            return found
    return None


def _guard(function, name, reject):
    def guarded(*args, **kwargs):
        result = function(*args, **kwargs)
        foreign = _foreign_type(result)
        if foreign is not None:  # fatal even if the test catches exceptions
            reject(f"{name} returned a {foreign.__module__}.{foreign.__qualname__}; "
                   "the tests accept plain data only (numbers, strings, lists, dicts, ...)")
        return result

    return guarded


def _failing_assert(test, exc):
    """(source of the failing assert, repr of its left side's value) when the test failed on
    ``assert <expr> == <expected>``; either may be None."""
    import ast
    import traceback

    frame = None
    for entry, lineno in traceback.walk_tb(exc.__traceback__):
        if entry.f_code.co_filename == "test.py":
            frame, line = entry, lineno
    if frame is None:
        return None, None
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None, None
    node = next((n for n in ast.walk(tree) if isinstance(n, ast.Assert) and n.lineno <= line <= n.end_lineno), None)
    if node is None:
        lines = test.splitlines()
        return (lines[line - 1].strip() if 0 < line <= len(lines) else None), None
    source = (ast.get_source_segment(test, node) or "")[:2000]
    actual = None
    cond = node.test
    if isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], (ast.Eq, ast.Is)):
        try:
            value = eval(compile(ast.Expression(cond.left), "test.py", "eval"), frame.f_globals, frame.f_locals)
            actual = repr(value)[:2000]
        except BaseException:  # the program may fail again: then there is no value to show
            actual = None
    return source, actual


def _error_text(exc):
    """The traceback's last lines, without the harness's own frames."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()[-2000:]


def main():
    job = marshal.loads(sys.stdin.buffer.read())
    report = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # the program's prints are not needed and must not crowd out the verdict
    sys.stdin = open(0, closefd=False)
    nonce = job.pop("nonce")
    test = job.pop("test")
    entry = job.get("entry_point")

    def verdict(ok, **detail):
        line = f"{nonce} PASS\n" if ok else f"{nonce} FAIL {detail!r}\n"
        os.write(report, line.encode("utf-8", "replace"))
        os._exit(0 if ok else 1)

    namespace = {"__name__": "solution", "__builtins__": builtins}
    phase = "setup"
    try:
        exec(compile(job["setup"], "setup.py", "exec"), namespace)
        phase = "program"
        exec(compile(job["program"], "solution.py", "exec"), namespace)
    except BaseException as exc:  # SystemExit too: the tests never ran
        verdict(False, phase=phase, error=type(exc).__name__, message=_error_text(exc))
    scope = dict(namespace)
    scope["__builtins__"] = dict(_BUILTINS)
    scope["__name__"] = "__test__"
    if entry:
        function = namespace.get(entry)
        if not callable(function):
            verdict(False, phase="program", error="NameError",
                    message=f"the program does not define a function named {entry!r}")
        scope[entry] = _guard(function, entry, lambda message: verdict(False, phase="test", error="TypeError",
                                                                        message=message))
    try:
        exec(compile(test, "test.py", "exec"), scope)
    except BaseException as exc:
        source, actual = _failing_assert(test, exc) if isinstance(exc, AssertionError) else (None, None)
        verdict(False, phase="test", error=type(exc).__name__, message=_error_text(exc), test=source, actual=actual)
    verdict(True)


main()
