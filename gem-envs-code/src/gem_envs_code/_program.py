"""The untrusted side of a function test: the agent's program, run as ``main.py`` in its
own sandbox, after ``_wire.py``'s source.

It decides nothing. It runs the setup code, the program and the test setup, says
which of the names the test uses it defines, then answers calls: each request names a
function (or an object it handed out earlier) and plain arguments; the answer is the
plain return value, or the exception raised. The verdict is the judge's, in another
process this one cannot reach; whatever this process prints, patches or exits with,
the worst it can do is answer a call wrongly or not at all.

Protocol (one JSON object a line): in ``{"setup", "program", "test_setup", "names"}``,
out ``{"ready": {name: info}}`` or ``{"failed": {...}}``; then in ``{"id", "call",
"args", "kwargs"}``, out ``{"id", "value"}`` / ``{"id", "raised"}`` / ``{"id", "unsendable"}``.
"""

# encode, decode and NotPlain come from _wire.py, whose source precedes this script's
# ruff: noqa: F821

import builtins
import json
import os
import sys
import types


def _error_text(exc):
    """The traceback's last lines, without this script's own frames."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()[-2000:]


def main():
    channel_in = os.fdopen(os.dup(0), "rb")
    channel_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # the program's prints are not needed and must not crowd the channel
    sys.stdin = open(0, closefd=False)

    def send(message):
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")
        while data:
            data = data[os.write(channel_out, data):]

    job = json.loads(channel_in.readline())
    namespace = {"__name__": "solution", "__builtins__": builtins}
    for phase in ("setup", "program", "test_setup"):
        try:
            exec(compile(job[phase], f"{phase}.py", "exec"), namespace)
        except BaseException as exc:  # SystemExit too: the tests never ran
            send({"failed": {"phase": phase, "error": type(exc).__name__, "message": _error_text(exc)}})
            return
    handles = []

    def refer(value):
        handles.append(value)
        return {"h": [len(handles) - 1, f"{type(value).__module__}.{type(value).__qualname__}"]}

    def resolve(tag, body):
        if tag == "h":
            return handles[body[0]]
        return namespace[body]

    ready = {}
    for name in job["names"]:
        if name not in namespace or name.startswith("__"):
            continue
        value = namespace[name]
        if type(value) is types.ModuleType:
            ready[name] = {"module": value.__name__}
        elif callable(value):
            ready[name] = {"callable": True}
        else:
            try:
                ready[name] = {"value": encode(value, refer)}
            except NotPlain as exc:
                ready[name] = {"unsendable": f"{exc.kind.__module__}.{exc.kind.__qualname__}"}
    send({"ready": ready})
    for line in channel_in:
        request = json.loads(line)
        reply = {"id": request["id"]}
        try:
            function = decode(request["call"], resolve)
            args = decode(request["args"], resolve)
            kwargs = dict(decode(request["kwargs"], resolve))
            result = function(*args, **kwargs)
        except BaseException as exc:
            reply["raised"] = {"types": [k.__name__ for k in type(exc).__mro__], "message": _error_text(exc)}
        else:
            try:
                reply["value"] = encode(result, refer)
            except NotPlain as exc:
                reply["unsendable"] = f"{exc.kind.__module__}.{exc.kind.__qualname__}: {exc}"
        send(reply)


main()
