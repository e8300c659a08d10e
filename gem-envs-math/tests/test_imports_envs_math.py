"""gem-envs-math's modules form no import circle, counting the imports inside functions and the ``__init__`` of every
package a module imports from (issue 38; the check is gem-core's :mod:`gem.testing.import_graph`)."""

from pathlib import Path

from gem.testing.import_graph import assert_no_circles


def test_no_import_circle() -> None:
    assert_no_circles(Path(__file__).resolve().parents[1] / "src", "gem_envs_math")
