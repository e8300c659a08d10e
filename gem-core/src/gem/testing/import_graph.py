"""Import circles among a package's modules, for every package's tests (``tests/test_import_graph.py``).

Every ``import`` statement that runs counts, those inside functions too (a function-level import still ties two
modules together); those under ``if TYPE_CHECKING:`` do not. ``from pkg import name`` is an edge to ``pkg.name``
when that is a module, else to ``pkg``. Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``: from a
module outside ``a.b`` that is an edge to each (a module importing its own siblings has run its package's
``__init__`` already, so that one does not count).

>>> from pathlib import Path
>>> edges, outside = import_graph(Path("src"), "gem")     # doctest: +SKIP
>>> circles(edges)                                        # doctest: +SKIP
[]
"""

from __future__ import annotations

import ast
from pathlib import Path

from gem.fingerprint import parse_source


def _modules(src: Path, package: str) -> dict[str, Path]:
    modules = {}
    for path in (src / package).rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (imports for annotations never run)."""
    found: list[ast.AST] = []
    pending = [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def _imports(name: str, path: Path) -> list[str]:
    """Every module name ``name``'s source imports, absolute, at any depth of the source (not under
    ``if TYPE_CHECKING:``)."""
    found = []
    for node in _runtime_nodes(parse_source(path.read_text(), str(path))):
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


def import_graph(src: Path, package: str, parents: bool = True) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(edges between ``package``'s modules, outside top-level names each module imports). With ``parents``,
    importing ``a.b.c`` from outside ``a.b`` is also an edge to ``a.b`` and ``a`` (their ``__init__`` runs)."""
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
                if parents:
                    edges[name].update(_parents_run(name, target, modules))
    return edges, outside


def _parents_run(importer: str, target: str, modules: dict[str, Path]) -> set[str]:
    """The packages whose ``__init__`` importing ``target`` runs for ``importer``: every package above ``target``
    that does not also hold ``importer`` (a module importing its own siblings does not count against its own
    package: Python has run that ``__init__`` already)."""
    parts = target.split(".")
    found = set()
    for depth in range(1, len(parts)):
        package = ".".join(parts[:depth])
        if package in modules and not (importer == package or importer.startswith(package + ".")):
            found.add(package)
    return found


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


def assert_no_circles(src: Path, package: str) -> None:
    """Fail, naming them, when ``package`` (under ``src``) has import circles, parent packages counted."""
    found = circles(import_graph(src, package)[0])
    shown = "\n".join(" <-> ".join(c) for c in found)
    assert not found, f"import circles among {package}'s modules (imports inside functions and the __init__ of " \
                      f"the packages they import from count):\n{shown}"
