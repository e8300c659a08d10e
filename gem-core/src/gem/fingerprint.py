"""An env's content fingerprint: a short hash that changes when, and only when, what decides its episodes does.

It covers, for the env and every wrapper around it:

- the code: the syntax tree of each class in its method resolution order (formatting, comments and docstrings
  do not count), and of the module-level functions and constants that code names in its own module, followed
  transitively (prompt templates are such constants, or strings in the code itself);
- the distribution that ships the class and its version (``gem-envs-games 0.1.0``);
- the constructor arguments: those the env recorded when it was built (``gem.make`` passes the spec's defaults
  with the caller's overrides), or for an object that records none, its attributes named like its ``__init__``
  parameters;
- the data: :meth:`gem.Env.data_fingerprint` (a dataset env's records; ``None`` for an env without data).

Every record GEM writes carries it (``gem eval``'s JSONL and ``run.json``, gem-train's metrics, run folder and
checkpoints, the runner's trajectories), so a result says which env made it, and ``gem replay`` checks it.

>>> import gem
>>> from gem.testing.envs import CountEnv
>>> env_fingerprint(CountEnv(high=10)) == env_fingerprint(CountEnv(high=10)) != env_fingerprint(CountEnv(high=11))
True
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import json
import sys
import textwrap
import types
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

#: hex digits of a fingerprint (64 bits)
LENGTH = 16
_CACHE_ATTR = "_gem_fingerprint"


def digest(value: Any) -> str:
    """The fingerprint-length hash of a JSON-able value (canonical: sorted keys; other objects by ``repr``).

    >>> digest({"b": 1, "a": [1, 2]}) == digest({"a": [1, 2], "b": 1})
    True
    """
    text = json.dumps(value, sort_keys=True, default=_canonical, ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=LENGTH // 2).hexdigest()


def _canonical(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(map(repr, value))
    if isinstance(value, types.FunctionType | type):
        return f"{value.__module__}:{value.__qualname__}"
    text = repr(value)
    # an object without a repr of its own is named by its type, not its address
    return f"<{type(value).__module__}.{type(value).__qualname__}>" if " at 0x" in text else text


def records_fingerprint(records: Sequence[Any]) -> str:
    """The hash of a dataset's records, computed once per records object (a ``Records`` or list is not
    changed in place by the envs that pose it)."""
    cached = _RECORDS.get(id(records))
    if cached is not None and cached[0] is records:
        return cached[1]
    value = digest([_plain(record) for record in records])
    _RECORDS[id(records)] = (records, value)
    return value


_RECORDS: dict[int, tuple[Any, str]] = {}


def _plain(record: Any) -> Any:
    if isinstance(record, Mapping):
        return {str(k): _plain(v) for k, v in record.items()}
    if isinstance(record, (list, tuple)):
        return [_plain(v) for v in record]
    if hasattr(record, "__dataclass_fields__"):
        return {name: _plain(getattr(record, name)) for name in record.__dataclass_fields__}
    return record if isinstance(record, (str, int, float, bool, type(None))) else _canonical(record)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _again_on_ast_race(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, again when it fails only because another thread was building a syntax tree at the same
    moment: CPython 3.11 builds a tree's Python objects with a recursion counter every thread shares, and a thread
    switch mid-build raises ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905).
    Seen in CI runs here twice: in ``ast.parse`` (gem-evals' import-graph test) and inside ``inspect.getsource``,
    which parses a class's whole module to find it (an env's fingerprint came out None, so a changed env was
    resumed)."""
    for attempt in range(5):
        try:
            return fn(*args)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc) or attempt == 4:
                raise
    raise AssertionError("unreachable")


def parse_source(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, safe from other threads' parses (see :func:`_again_on_ast_race`); raises what it raises."""
    return _again_on_ast_race(ast.parse, source, filename)


def _parsed(obj: Any) -> ast.AST | None:
    try:
        source = _again_on_ast_race(inspect.getsource, obj)
        return _strip_docstrings(parse_source(textwrap.dedent(source)))
    except (OSError, TypeError, SyntaxError):
        return None


def _names(tree: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


@functools.cache
def code_fingerprint(cls: type) -> str:
    """The hash of ``cls``'s code: every class of its MRO but ``object``, and the module-level functions and
    constants they name in their modules (transitively). A class whose source cannot be read counts by name."""
    parts: list[Any] = []
    for klass in cls.__mro__:
        if klass is object:
            continue
        module = sys.modules.get(klass.__module__)
        tree = _parsed(klass)
        parts.append([klass.__module__, klass.__qualname__, ast.dump(tree) if tree is not None else None])
        if tree is None or module is None:
            continue
        seen: set[str] = set()
        pending = sorted(_names(tree))
        while pending:
            name = pending.pop()
            if name in seen or name not in vars(module):
                continue
            seen.add(name)
            value = vars(module)[name]
            if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
                function_tree = _parsed(value)
                parts.append([name, ast.dump(function_tree) if function_tree is not None else None])
                pending += sorted(_names(function_tree) - seen) if function_tree is not None else []
            elif isinstance(value, (str, int, float, bool, type(None))):
                parts.append([name, value])
            elif isinstance(value, (bytes, tuple, frozenset, list, dict, set)) and len(repr(value)) < 1_000_000:
                parts.append([name, _canonical(value)])
    return digest(parts)


@functools.cache
def distribution_of(module: str) -> str | None:
    """``name version`` of the installed distribution that ships ``module``'s top-level package (None: none)."""
    top = module.split(".")[0]
    names = metadata.packages_distributions().get(top) or []
    for name in names:
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return None


def constructor_arguments(env: Any) -> dict[str, Any]:
    """The arguments ``env`` was built with: those every :class:`gem.Env` records (``_init_args``, what
    ``spawn`` rebuilds from), else its attributes named like the parameters of its ``__init__``."""
    try:
        signature = inspect.signature(type(env).__init__)
    except (TypeError, ValueError):
        return {}
    recorded = getattr(env, "__dict__", {}).get("_init_args")
    if recorded is not None:
        # bound to the signature with its defaults: Guess() and Guess(high=4) are the same env
        try:
            bound = signature.bind(env, *recorded[0], **recorded[1])
        except TypeError:
            return {"args": list(recorded[0]), **recorded[1]}
        bound.apply_defaults()
        return {name: value for name, value in list(bound.arguments.items())[1:]}
    parameters = signature.parameters
    state = getattr(env, "__dict__", {})
    return {name: state[name] for name in parameters if name != "self" and name in state
            and not callable(state[name])}


def _layers(env: Any) -> list[Any]:
    layers = [env]
    while hasattr(layers[-1], "env") and layers[-1].env is not layers[-1] and len(layers) < 64:
        inner = layers[-1].__dict__.get("env") if hasattr(layers[-1], "__dict__") else None
        if inner is None:
            break
        layers.append(inner)
    return layers


def env_fingerprint(env: Any) -> str:
    """``env``'s content fingerprint (see the module); computed once per env object."""
    cached = getattr(env, "__dict__", {}).get(_CACHE_ATTR)
    if cached is not None:
        return cached
    layers = _layers(env)
    inner = layers[-1]
    data = inner.data_fingerprint() if hasattr(inner, "data_fingerprint") else None
    parts = {
        "layers": [[code_fingerprint(type(layer)), distribution_of(type(layer).__module__),
                    constructor_arguments(layer) if layer is not inner else None] for layer in layers],
        "arguments": constructor_arguments(inner),
        "data": data,
    }
    value = digest(parts)
    try:
        env.__dict__[_CACHE_ATTR] = value
    except (AttributeError, TypeError):
        pass
    return value


def safe_fingerprint(env: Any) -> str | None:
    """:func:`env_fingerprint`, or None where it cannot be computed (a record is still written without it)."""
    try:
        return env_fingerprint(env)
    except Exception:  # an env whose attributes or source defeat it: the record says so with None
        return None
