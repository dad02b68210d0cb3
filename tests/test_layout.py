"""The product's layout: `bot`, `agent`, `db` and `jobs` import nothing from the tests or benchmarks,
no module imports itself back through others (at import time or inside a function), and no module
grows past the size limit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.structure import LINE_LIMIT, scan

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


def test_no_import_cycle_and_no_module_over_the_limit() -> None:
    structure = scan(ROOT)
    assert structure.eager_cycles == []
    assert structure.all_cycles == []  # lazy (function-level) imports included
    assert [m.path for m in structure.over(LINE_LIMIT)] == []
    # The scan sees the product and its imports.
    assert "agent.chat.tools" in structure.modules["agent.chat.agent"].eager
    assert len(structure.modules) > 200


@pytest.mark.process
def test_bench_runs_from_the_bot_command_line() -> None:
    import subprocess
    import sys

    shown = subprocess.run(
        [sys.executable, "-m", "bot", "bench", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "python -m bot bench" in shown.stdout and "memory" in shown.stdout
