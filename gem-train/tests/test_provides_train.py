"""gem-train says through its gem_register_provides hook that it provides `gem train` (issue 38): the unknown-
command hint reads its word, not only gem-core's fallback table."""

from __future__ import annotations

from gem.plugins import catalog
from gem.provides import undeclared


def test_it_declares_the_command_it_registers() -> None:
    assert next(p for p in catalog().plugins if p.distribution == "gem-train").status == "ok"
    assert undeclared(catalog(), "gem-train") == []
    assert catalog().provides.provider("command", "train") == "gem-train"
