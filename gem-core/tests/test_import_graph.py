"""gem-core is the kernel: its modules form no import circle, and it imports no other package of ours.

Every ``import`` statement counts, those inside functions too (a function-level import still ties
two modules together). ``from pkg import name`` is an edge to ``pkg.name`` when that is a module,
else to ``pkg``; the implicit import of a module's parent packages is not an edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
#: the import names of the project's other packages, which gem-core must not import
OURS = ("gem_", "gem_train", "gem_tools", "gem_evals", "gem_integrations")


def _modules(src: Path = SRC, package: str = "gem") -> dict[str, Path]:
    modules = {}
    for path in (src / package).rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(name: str, path: Path) -> list[str]:
    """Every module name ``name``'s source imports, absolute, at any depth of the source."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # ``from pkg import name``: the module pkg.name if there is one, else pkg (see _resolve)
            found += [f"{module}.{alias.name}" for alias in node.names]
    return found


def _resolve(target: str, modules: dict[str, Path]) -> str:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target


def import_graph(src: Path = SRC, package: str = "gem") -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(edges between ``package``'s modules, outside top-level names each module imports)."""
    modules = _modules(src, package)
    edges: dict[str, set[str]] = {m: set() for m in modules}
    outside: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for target in _imports(name, path):
            if target.split(".")[0] != package:
                outside[name].add(target.split(".")[0])
                continue
            target = _resolve(target, modules)
            if target and target != name:
                edges[name].add(target)
    return edges, outside


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_gem_cores_modules_form_no_import_circle() -> None:
    edges, _ = import_graph()
    found = circles(edges)
    shown = "\n".join(" <-> ".join(c) for c in found)
    assert not found, f"import circles among gem-core's modules (imports inside functions count):\n{shown}"


def test_gem_core_imports_no_other_package_of_ours() -> None:
    _, outside = import_graph()
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
