"""gem-tools says through its gem_register_provides hook what it provides (issue 38): an install without it
still names it from gem-core's fallback tables, an install with it reads its own word, extras included."""

from __future__ import annotations

from gem.plugins import catalog
from gem.provides import undeclared


def test_it_declares_every_prefix_command_and_reference_path_it_registers() -> None:
    assert next(p for p in catalog().plugins if p.distribution == 'gem-tools').status == "ok"
    assert undeclared(catalog(), 'gem-tools') == []


def test_its_own_word_names_it_with_the_extra_each_part_needs() -> None:
    provides = catalog().provides
    assert provides.provider('command', 'sandbox') == 'gem-tools'
    assert provides.provider('reference_path', 'gem.tools') == 'gem-tools'
