from __future__ import annotations

import secrets

import pytest

from gem_tools.sandbox import Limits, Sandbox

ISOLATING = ("bwrap", "unshare")


@pytest.fixture(params=ISOLATING)
def box(request) -> Sandbox:
    """A sandbox per isolating backend, with tight limits so hostile programs end fast.

    A backend that does not work here fails the test (CI installs bubblewrap)."""
    return Sandbox(backend=request.param, limits=Limits(timeout=5, memory=512 << 20, processes=32))


@pytest.fixture
def marker() -> str:
    """A token to find a run's processes by their command line."""
    return "gem-sbx-" + secrets.token_hex(6)
