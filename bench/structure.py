"""`bench structure`: the shape of the source tree, read with `ast` alone (nothing of the product runs).

It prints the modules per top-level folder, the largest product modules, those over the size limit,
and the import cycles among product modules: once with the imports that run when a module is
loaded, once with every import (a lazy import still ties two modules together, it only moves the
failure from start to first use; an import under `if TYPE_CHECKING:` never runs, yet the two
modules still name each other, so neither can be read, moved or typed without the other). Each
module keeps its three kinds apart (`eager`, `lazy`, `typing`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PRODUCT = ("bot", "agent", "db", "jobs")
LINE_LIMIT = 400
_SKIPPED = {".venv", ".git", "node_modules", "__pycache__", "data", "build", "dist"}
_MAX_CYCLES_PER_KNOT = 50

Imported = ast.Import | ast.ImportFrom


@dataclass(frozen=True)
class Module:
    """One product module: its dotted name, path relative to the root, line count and imports."""

    name: str
    path: str
    lines: int
    eager: frozenset[str]
    lazy: frozenset[str]
    typing: frozenset[str] = frozenset()

    @property
    def imports(self) -> frozenset[str]:
        """Every product module this one names in an import: eager, lazy and `TYPE_CHECKING`."""
        return self.eager | self.lazy | self.typing


@dataclass
class Structure:
    """What `scan` found in a tree."""

    folders: dict[str, int]
    modules: dict[str, Module]
    eager_cycles: list[list[str]] = field(default_factory=list)
    all_cycles: list[list[str]] = field(default_factory=list)

    def largest(self, count: int) -> list[Module]:
        """The `count` longest product modules, longest first."""
        return sorted(self.modules.values(), key=lambda m: (-m.lines, m.path))[:count]

    def over(self, limit: int = LINE_LIMIT) -> list[Module]:
        """Product modules longer than `limit` lines."""
        return [m for m in self.largest(len(self.modules)) if m.lines > limit]


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[Imported, bool, bool]]:
    """Every import, with whether it sits inside a function and whether only under `TYPE_CHECKING`."""

    def visit(node: ast.AST, in_function: bool, for_typing: bool) -> Iterator[tuple[Imported, bool, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, in_function, for_typing
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                yield from visit(statement, in_function, True)
            for statement in node.orelse:
                yield from visit(statement, in_function, for_typing)
        else:
            inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            for child in ast.iter_child_nodes(node):
                yield from visit(child, inner, for_typing)

    for child in ast.iter_child_nodes(tree):
        yield from visit(child, False, False)


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, known: set[str]) -> set[str]:
    """The product modules an import statement loads, parent packages included."""
    names: set[str] = set()
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:
            package = importer.split(".") if is_package else importer.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            names.add(submodule if submodule in known else base)
    found: set[str] = set()
    own_packages = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 1)}
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            # A package the importer lives in is already loading: only the named module itself counts.
            if prefix in known and prefix != importer and (prefix == name or prefix not in own_packages):
                found.add(prefix)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The elementary cycles of `graph`, each starting at its smallest name, sorted."""
    cycles: list[list[str]] = []
    for knot in _knots(graph):
        members = sorted(knot)
        found: list[list[str]] = []
        for index, start in enumerate(members):
            allowed = set(members[index:])
            stack: list[tuple[str, list[str]]] = [(start, [start])]
            while stack and len(found) < _MAX_CYCLES_PER_KNOT:
                node, path = stack.pop()
                for target in sorted(graph[node] & allowed, reverse=True):
                    if target == start:
                        found.append(path)
                    elif target not in path:
                        stack.append((target, [*path, target]))
        cycles.extend(found)
    return sorted(cycles, key=lambda cycle: (len(cycle), cycle))


def _knots(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with a cycle in them (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    knots: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph[node]:
                        knots.append(component)
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph[target]))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return knots


def scan(root: Path) -> Structure:
    """Read the tree under `root`: module counts per folder, product modules and their import cycles."""
    folders: dict[str, int] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if len(parts) > 1 and not _SKIPPED.intersection(parts) and not parts[0].startswith("."):
            folders[parts[0]] = folders.get(parts[0], 0) + 1
    paths = {
        _module_name(path, root): path
        for folder in PRODUCT
        for path in sorted((root / folder).rglob("*.py"))
        if "__pycache__" not in path.parts
    }
    known = set(paths)
    modules: dict[str, Module] = {}
    for name, path in paths.items():
        source = path.read_text(encoding="utf-8")
        eager: set[str] = set()
        lazy: set[str] = set()
        typing: set[str] = set()
        for node, in_function, for_typing in _imports(ast.parse(source, filename=str(path))):
            targets = _targets(node, name, path.name == "__init__.py", known)
            (typing if for_typing else lazy if in_function else eager).update(targets)
        modules[name] = Module(
            name=name,
            path=str(path.relative_to(root)),
            lines=len(source.splitlines()),
            eager=frozenset(eager),
            lazy=frozenset(lazy - eager),
            typing=frozenset(typing - eager - lazy),
        )
    structure = Structure(folders=folders, modules=modules)
    structure.eager_cycles = _cycles({m.name: set(m.eager) for m in modules.values()})
    structure.all_cycles = _cycles({m.name: set(m.imports) for m in modules.values()})
    return structure


def report(structure: Structure, *, largest: int = 15) -> str:
    """The printed form of a scan."""
    lines = ["modules per top-level folder"]
    lines += [f"  {folder:<8} {count:>5}" for folder, count in sorted(structure.folders.items())]
    lines.append(f"largest product modules (of {len(structure.modules)}), lines")
    lines += [f"  {m.lines:>5}  {m.path}" for m in structure.largest(largest)]
    over = structure.over()
    lines.append(f"product modules over {LINE_LIMIT} lines: {len(over)}")
    lines += [f"  {m.lines:>5}  {m.path}" for m in over]
    for title, cycles in (
        ("import cycles at module level", structure.eager_cycles),
        ("import cycles with lazy and TYPE_CHECKING imports", structure.all_cycles),
    ):
        lines.append(f"{title}: {len(cycles)}")
        lines += ["  " + " -> ".join([*cycle, cycle[0]]) for cycle in cycles]
    return "\n".join(lines)


def run_structure(root: Path) -> int:
    """Print the structure of the tree at `root`; returns the exit status (1 when it has a cycle)."""
    structure = scan(root)
    print(report(structure))
    return 1 if structure.all_cycles else 0
