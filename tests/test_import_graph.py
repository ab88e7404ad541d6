"""The product packages import one another without circles.

Every ``.py`` under harness/, tasks/, training/ and leaderboards/ is parsed with ``ast``; every import
statement counts, at module level, inside a function or under ``if TYPE_CHECKING:`` (a deferred
import is still an arrow between the two modules, and a circle of them is one refactor away from
an import-time failure).
``import a.b`` names module ``a.b``, ``from a import b`` names ``a.b`` when that is a module and ``a``
otherwise, relative imports are resolved against the importing module, and an import of a package
counts as its ``__init__``. The test fails on any cycle and prints it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "tasks", "training", "leaderboards")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every product module by dotted name (a package by its own name, meaning its ``__init__``)."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            modules[_module_name(path, root)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The product module ``name`` refers to: itself, or the nearest enclosing module that exists."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The product modules that ``module`` imports, at any level of its code."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules)
                if target is not None:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".") if package else []
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # ``from a import b``: module a.b when that is a module, else a name in a.
                submodule = f"{base}.{alias.name}"
                target = submodule if submodule in modules else _resolve(base, modules)
                if target is not None:
                    found.add(target)
    found.discard(module)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = product_modules(root)
    return {module: imports_of(module, path, modules) for module, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as ``[a, b, ..., a]``, or None when it has none."""
    white, grey, black = 0, 1, 2
    colour = dict.fromkeys(graph, white)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = grey
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt, black) == grey:
                return stack[stack.index(nxt) :] + [nxt]
            if colour.get(nxt) == white:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        stack.pop()
        colour[node] = black
        return None

    for node in sorted(graph):
        if colour[node] == white:
            cycle = visit(node)
            if cycle is not None:
                return cycle
    return None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each group of modules that reach one another (each strongly connected part)."""
    found: list[list[str]] = []
    remaining = dict(graph)
    while (cycle := find_cycle(remaining)) is not None:
        found.append(cycle)
        # Drop the part the cycle lies in (everything that both reaches and is reached from it).
        part = _reachable(remaining, cycle[0]) & _reachable(_reverse(remaining), cycle[0])
        remaining = {m: targets - part for m, targets in remaining.items() if m not in part}
    return found


def _reverse(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    reverse: dict[str, set[str]] = {m: set() for m in graph}
    for module, targets in graph.items():
        for target in targets:
            reverse.setdefault(target, set()).add(module)
    return reverse


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_product_packages_have_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50, "the product packages were not found"
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


@pytest.mark.parametrize(
    ("files", "cyclic"),
    [
        ({"harness/__init__.py": "", "harness/a.py": "from harness.b import x\n", "harness/b.py": "x = 1\n"}, False),
        (
            {
                "harness/__init__.py": "",
                "harness/a.py": "def f():\n    from .b import x\n",
                "harness/b.py": "import harness.a\n",
            },
            True,
        ),
        (
            {
                "harness/__init__.py": "from harness import sub\n",
                "harness/sub/__init__.py": "",
                "harness/sub/m.py": "from .. import other\n",
                "harness/other.py": "import harness.sub.m\n",
            },
            True,
        ),
        (
            {
                "harness/__init__.py": "",
                "harness/sub/__init__.py": "from harness.top import y\n",
                "harness/sub/m.py": "z = 1\n",
                "harness/top.py": "from harness.sub.m import z\n",
            },
            False,
        ),
        (
            {
                "harness/__init__.py": "",
                "harness/sub/__init__.py": "from harness.top import y\n",
                "harness/top.py": "from harness.sub import z\n",
            },
            True,
        ),
    ],
)
def test_the_graph_sees_every_kind_of_import(tmp_path: Path, files: dict[str, str], cyclic: bool) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert (find_cycle(import_graph(tmp_path)) is not None) is cyclic
