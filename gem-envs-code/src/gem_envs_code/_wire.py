"""Plain values as JSON, between the trusted judge and the agent's program (stdlib only).

Its source is the first part of both sandboxed scripts (``_judge.py``, ``_program.py``),
which cannot import this package. Only exact builtin types travel: ``None``, ``bool``,
``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``, ``set``,
``frozenset``, ``dict`` and collections' ``Counter``/``OrderedDict``/``defaultdict``/
``deque``; a subclass (an ``int`` whose ``__eq__`` always says yes) is not one of them.
Encoding an exact builtin runs none of the program's code, and decoding builds fresh
objects of the judge's own types, so nothing of the program's comes along.

A JSON object is always a one-key tag: ``{"t": [...]}`` a tuple, ``{"d": [[k, v], ...]}``
a dict, ``{"i": hex}`` a big int, ``{"h": [n, type]}`` an object that stays in the
program's process (a handle), ``{"n": name}`` a name there.
"""

import base64
import collections
import math

#: nodes one value may hold (shared sub-lists count each time they are reached)
MAX_NODES = 1 << 21
#: nesting depth one value may have
MAX_DEPTH = 200
_SAFE_INT = 1 << 53
_SEQUENCES = {tuple: "t", set: "s", frozenset: "z", collections.deque: "Q"}
_MAPPINGS = {dict: "d", collections.Counter: "C", collections.OrderedDict: "O", collections.defaultdict: "D"}


class NotPlain(Exception):
    """A value holds something that is not plain data (``kind``), or is too big to send."""

    def __init__(self, kind, why="not plain data"):
        super().__init__(why)
        self.kind = kind


def encode(value, refer=None):
    """The JSON-ready form of ``value``; ``refer(value)`` gives a reference for a
    top-level value that is not plain (else :class:`NotPlain` is raised)."""
    budget = [MAX_NODES]
    try:
        return _encode(value, budget, 0)
    except NotPlain:
        if refer is None or type(value) in _PLAIN_TYPES:
            raise
        return refer(value)


def _encode(value, budget, depth):
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise NotPlain(type(value), "too large or too deeply nested")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value if -_SAFE_INT < value < _SAFE_INT else {"i": format(value, "x")}
    if kind is float:
        return value if math.isfinite(value) else {"f": repr(value)}
    if kind is list:
        return [_encode(v, budget, depth + 1) for v in value]
    if kind in _SEQUENCES:
        return {_SEQUENCES[kind]: [_encode(v, budget, depth + 1) for v in value]}
    if kind in _MAPPINGS:
        pairs = [[_encode(k, budget, depth + 1), _encode(v, budget, depth + 1)] for k, v in dict.items(value)]
        return {_MAPPINGS[kind]: pairs}
    if kind is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if kind is complex:
        return {"c": [_encode(value.real, budget, depth + 1), _encode(value.imag, budget, depth + 1)]}
    raise NotPlain(kind)


_PLAIN_TYPES = {type(None), bool, int, float, complex, str, bytes, list, *_SEQUENCES, *_MAPPINGS}
_BUILD = {
    "t": tuple, "s": set, "z": frozenset, "Q": collections.deque,
    "d": dict, "C": lambda pairs: collections.Counter(dict(pairs)), "O": collections.OrderedDict,
    "D": lambda pairs: collections.defaultdict(None, pairs),
}  # fmt: skip


def decode(obj, resolve=None):
    """The value ``obj`` (parsed JSON) stands for; ``resolve(tag, body)`` turns a
    reference (``h``, ``n``) into an object. Raises ``ValueError`` on anything malformed."""
    kind = type(obj)
    if obj is None or kind is bool or kind is int or kind is float or kind is str:
        return obj
    if kind is list:
        return [decode(v, resolve) for v in obj]
    if kind is not dict or len(obj) != 1:
        raise ValueError("malformed value")
    ((tag, body),) = obj.items()
    if tag == "i" and type(body) is str:
        return int(body, 16)
    if tag == "f" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "b" and type(body) is str:
        return base64.b64decode(body, validate=True)
    if tag == "c" and type(body) is list and len(body) == 2:
        return complex(decode(body[0]), decode(body[1]))
    if tag in _BUILD and type(body) is list:
        if tag in "dCOD":
            if not all(type(p) is list and len(p) == 2 for p in body):
                raise ValueError("malformed mapping")
            return _BUILD[tag]([(decode(k, resolve), decode(v, resolve)) for k, v in body])
        return _BUILD[tag](decode(v, resolve) for v in body)
    if tag in ("h", "n") and resolve is not None:
        return resolve(tag, body)
    raise ValueError(f"malformed value (tag {tag!r})")
