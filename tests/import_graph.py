"""The project's Python read as a graph of runtime imports, and the functions too long to read on one screen.

Read from the source with ``ast`` (nothing is imported): an import under ``if TYPE_CHECKING:`` is a type
annotation's, not run, so it is no edge; ``from pkg import name`` is an edge to ``pkg.name`` where that is a
module, else to ``pkg``. tests/test_structure.py holds the project to it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

Graph = dict[str, set[str]]
#: The calls that import a module named by a string: an edge when the string is a literal.
DYNAMIC_IMPORTS = ("importlib.import_module", "import_module", "__import__")


def modules(root: Path, tops: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for the packages and top-level modules ``tops`` under ``root``."""
    found: dict[str, Path] = {}
    for top in tops:
        files = [root / f"{top}.py"] if (root / f"{top}.py").is_file() else sorted((root / top).rglob("*.py"))
        for path in files:
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The statements under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): never run. Its ``else:`` runs."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def _imported_names(node: ast.AST, package: str, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.Call) and ast.unparse(node.func) in DYNAMIC_IMPORTS:
        first = node.args[0] if node.args else None
        return [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        if node.level - 1 >= len(parts):  # above the top package: Python refuses it, and so does nothing here
            return []
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]


def dynamic_imports(known: dict[str, Path]) -> list[str]:
    """``importlib.import_module`` or ``__import__`` of a name that is no literal: an import no graph can follow."""
    found = []
    for module, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in DYNAMIC_IMPORTS:
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    found.append(f"{module}:{node.lineno}")
    return found


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The project module ``name`` is, or is in (``config.naming.ResourceNames`` -> ``config.naming``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def raw_imports(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> every name it imports when it runs, as written (made absolute), the project's or not."""
    imports: dict[str, set[str]] = defaultdict(set)
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) not in skipped:
                imports[module].update(_imported_names(node, package, known))
    return dict(imports)


def import_graph(known: dict[str, Path]) -> Graph:
    """Module -> the project modules it imports when it runs."""
    graph: Graph = defaultdict(set)
    for module, names in raw_imports(known).items():
        for name in names:
            owner = _owner(name, known)
            if owner and owner != module:
                graph[module].add(owner)
    return dict(graph)


def package_graph(graph: Graph, known: dict[str, Path]) -> Graph:
    """The same graph between packages (a module counts as its package's)."""

    def package(module: str) -> str:
        return module if known[module].name == "__init__.py" else (module.rpartition(".")[0] or module)

    packages: Graph = defaultdict(set)
    for source, targets in graph.items():
        for target in targets:
            if package(source) != package(target):
                packages[package(source)].add(package(target))
    return dict(packages)


def within_one_package(group: list[str]) -> bool:
    """A package and its own subpackages only: ``ops`` registers ``ops.job``'s commands, which read ``ops``' helpers."""
    return all(name == group[0] or name.startswith(f"{group[0]}.") for name in group)  # cycles() sorts each group


def reach(graph: Graph, known: dict[str, Path], start: Iterable[str]) -> set[str]:
    """Every project module that importing ``start`` runs: what they import, around, and each one's parent
    packages (``import a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first)."""
    seen: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parents = [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
        todo.extend([*graph.get(module, ()), *(p for p in parents if p in known)])
    return seen


def cycles(graph: Graph) -> list[list[str]]:
    """Every group of nodes that import each other, directly or around (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while (member := stack.pop()) != node:
                group.append(member)
            if group:
                found.append(sorted([node, *group]))

    for node in sorted({*graph, *(t for targets in graph.values() for t in targets)}):
        if node not in index:
            visit(node)
    return found


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Each function with its qualified name (``Class.method``, ``outer.<locals>.inner``), as Python names them."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield f"{prefix}{node.name}", node
            yield from _functions(node, f"{prefix}{node.name}.<locals>.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def long_functions(known: dict[str, Path], root: Path, limit: int) -> Iterator[tuple[str, int]]:
    """``path::qualified.name`` and its length in lines (its decorators counted), for every function longer than
    ``limit`` lines."""
    for path in known.values():
        for name, node in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - first + 1
            if length > limit:
                yield f"{path.relative_to(root).as_posix()}::{name}", length
