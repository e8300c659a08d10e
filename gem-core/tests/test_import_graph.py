"""gem-core is the kernel: its modules form no import circle, and it imports no other package of ours.

Every ``import`` statement counts, those inside functions too (a function-level import still ties
two modules together), and so does the ``__init__`` of each package a module imports from
(:mod:`gem.testing.import_graph`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gem.testing.import_graph import assert_no_circles, circles, import_graph

SRC = Path(__file__).resolve().parents[1] / "src"
#: the import names of the project's other packages, which gem-core must not import
OURS = ("gem_", "gem_train", "gem_tools", "gem_evals", "gem_integrations")


def test_gem_cores_modules_form_no_import_circle() -> None:
    assert_no_circles(SRC, "gem")


def test_gem_core_imports_no_other_package_of_ours() -> None:
    _, outside = import_graph(SRC, "gem")
    offending = {m: sorted(t for t in tops if t.startswith(OURS)) for m, tops in outside.items()}
    offending = {m: t for m, t in offending.items() if t}
    assert not offending, f"gem-core modules importing other GEM packages: {offending}"


def test_the_check_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    package = tmp_path / "demo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from demo.b import g\n")
    (package / "b.py").write_text("def g():\n    from demo import a\n    return a\n")
    (package / "c.py").write_text("import demo.a\n")
    edges, _ = import_graph(tmp_path, "demo")
    assert circles(edges) == [["demo.a", "demo.b"]]


@pytest.mark.parametrize("text", ["from demo import attr\n", "from . import attr\n"])
def test_importing_an_attribute_of_a_package_is_an_edge_to_the_package(tmp_path: Path, text: str) -> None:
    package = tmp_path / "demo"
    package.mkdir()
    (package / "__init__.py").write_text("from demo.a import attr\n")
    (package / "a.py").write_text("attr = 1\n")
    (package / "b.py").write_text(text)
    edges, _ = import_graph(tmp_path, "demo")
    assert edges["demo.b"] == {"demo"} and edges["demo"] == {"demo.a"}


def test_importing_a_submodule_from_outside_its_package_runs_the_packages_init(tmp_path: Path) -> None:
    """gem.plugins importing gem.compat.rows runs gem/compat/__init__, which imported gem.plugins: a circle the
    old check missed."""
    package = tmp_path / "demo"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("def f():\n    from demo import plugins\n")
    (package / "sub" / "rows.py").write_text("X = 1\n")
    (package / "sub" / "more.py").write_text("from demo.sub.rows import X\n")  # a sibling's: no edge to sub
    (package / "plugins.py").write_text("from demo.sub.rows import X\n")
    edges, _ = import_graph(tmp_path, "demo")
    assert edges["demo.plugins"] == {"demo.sub.rows", "demo.sub"}
    assert edges["demo.sub.more"] == {"demo.sub.rows"}
    assert circles(edges) == [["demo.plugins", "demo.sub"]]
    assert circles(import_graph(tmp_path, "demo", parents=False)[0]) == []


def test_the_kernels_modules_never_import_gem_compat() -> None:
    """compat reaches the kernel's types through gem.extend alone (issue 38): before, gem.core took its metaclass
    from gem.compat.ctor_seed, VectorEnv.reset called gem.compat.shims, the plugin catalog held gem.compat's row
    registry and gem._builtin imported gem.compat.table. Allowed: gem.compat itself, ``gem/__init__`` (the
    facade, which composes the kernel with compat) and the small files standing at the reference's module paths
    (which are compat's: they call gem.compat.become_reference)."""
    edges, _ = import_graph(SRC, "gem", parents=False)
    files = {m: SRC.joinpath(*m.split(".")) for m in edges}
    files = {m: p / "__init__.py" if p.is_dir() else p.with_suffix(".py") for m, p in files.items()}
    stubs = {m for m, path in files.items() if "become_reference(" in path.read_text()}
    assert {"gem.envs", "gem.vector.vector_env"} <= stubs
    compat = {m for m in edges if m == "gem.compat" or m.startswith("gem.compat.")}
    importers = {m: sorted(t & compat) for m, t in edges.items() if t & compat}
    kernel = {m: t for m, t in importers.items() if m not in compat | stubs | {"gem"}}
    assert not kernel, f"kernel modules importing gem.compat (use gem.extend's points): {kernel}"
