"""Parsing Python source in the trusted process, safe from several threads at once.

CPython 3.11's ``ast.parse`` keeps its recursion-depth counter per interpreter, not per thread: a parse that
overlaps another thread's raises ``SystemError: AST constructor recursion depth mismatch``. The judge parses
tests from the runner's worker threads and vector envs' threads, and other code (``inspect``, the fingerprint)
parses beside it, so a lock here could not cover every parse: this is gem-core's one parse that tries again on
exactly that error.
"""

from __future__ import annotations

import ast

from gem.fingerprint import parse_source


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)``, safe from other threads' parses (raises what ``ast.parse`` raises)."""
    return parse_source(source)
