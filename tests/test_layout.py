"""The product's layout: `bot`, `agent`, `db` and `jobs` import nothing from the tests or benchmarks,
and no module imports itself back through others at import time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("bot", "agent", "db", "jobs")
OUTSIDE = ("tests", "bench")


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_product_imports_neither_tests_nor_benchmarks() -> None:
    offenders = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            found = {
                name
                for name in _imported(ast.parse(path.read_text(encoding="utf-8")))
                if name.split(".")[0] in OUTSIDE
            }
            if found:
                offenders[str(path.relative_to(ROOT))] = sorted(found)
    assert offenders == {}
    # The scan sees the product: the packages are there and import one another.
    assert len(list((ROOT / "agent").rglob("*.py"))) > 20


def _module_graph() -> dict[str, set[str]]:
    """Each product module and the product modules its top-level imports load."""
    modules = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # top level: what runs at import
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
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

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    graph = _module_graph()
    assert _cycles(graph) == []
    # The scan finds a circle where there is one.
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "agent.chat.tools" in graph["agent.chat.agent"]


@pytest.mark.process
def test_bench_runs_from_the_bot_command_line() -> None:
    import subprocess
    import sys

    shown = subprocess.run(
        [sys.executable, "-m", "bot", "bench", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "python -m bot bench" in shown.stdout and "memory" in shown.stdout
