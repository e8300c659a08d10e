"""Shared fixtures. The offline data must be fetched once before the tests run:
``python -m gem_envs_code.data`` (see the package README)."""

from __future__ import annotations

import pytest

from gem_envs_code import data
from gem_envs_code.env import default_python
from gem_envs_code.problems import Problem
from gem_envs_code.sources import load_packaged
from gem_tools.sandbox import Limits, Sandbox


@pytest.fixture(scope="session", autouse=True)
def _offline_data() -> None:
    missing = [d for d in data.DATA_PACKAGES if data.where(d) is None]
    if missing:
        pytest.fail(f"offline code data missing for {missing}: run `python -m gem_envs_code.data` first", pytrace=False)


@pytest.fixture(scope="session")
def humaneval() -> tuple[Problem, ...]:
    return load_packaged("humaneval")


@pytest.fixture(scope="session")
def mbpp() -> tuple[Problem, ...]:
    return load_packaged("mbpp")


@pytest.fixture(scope="session")
def sandbox() -> Sandbox:
    return Sandbox(limits=Limits(timeout=10), python=default_python())


def fenced(code: str) -> str:
    """An answer holding ``code`` in a python block."""
    return f"Here it is:\n```python\n{code}\n```\n"
