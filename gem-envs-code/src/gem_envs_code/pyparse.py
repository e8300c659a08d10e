"""Parsing Python source in the trusted process, safe from several threads at once.

CPython 3.11's ``ast.parse`` keeps its recursion-depth counter per interpreter, not per
thread: when the garbage collector runs Python code (a ``__del__``) in the middle of one
parse and another thread parses meanwhile, the first raises ``SystemError: AST
constructor recursion depth mismatch``. The judge parses tests from the runner's worker
threads and vector envs' threads, so every parse here holds one lock.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)``, one thread at a time (raises what ``ast.parse`` raises)."""
    with _LOCK:
        return ast.parse(source)
