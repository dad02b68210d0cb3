"""`bench structure` reads a tree without running it: counts, sizes, every import cycle (those
through `TYPE_CHECKING` imports too), and the three kinds of import kept apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.__main__ import main
from bench.structure import scan


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root


def test_cycles_at_import_time_inside_functions_and_under_type_checking(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "agent/__init__.py": "",
            "agent/a.py": "from agent import b\n",
            "agent/b.py": "import agent.a\n",
            "agent/c.py": "def f():\n    from agent.d import g\n",
            "agent/d.py": "from . import c\n",
            "agent/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agent.f import x\n",
            "agent/f.py": "from agent.e import y\n" + "z = 1\n" * 401,
            "db/__init__.py": "",
            "tests/test_x.py": "",
        },
    )
    structure = scan(root)
    assert structure.eager_cycles == [["agent.a", "agent.b"]]
    # A lazy import and a TYPE_CHECKING import still tie two modules into a cycle.
    assert structure.all_cycles == [["agent.a", "agent.b"], ["agent.c", "agent.d"], ["agent.e", "agent.f"]]
    # A TYPE_CHECKING import is kept apart from the others.
    assert structure.modules["agent.e"].typing == {"agent.f"}
    assert structure.modules["agent.e"].imports == {"agent.f"}
    assert structure.modules["agent.c"].imports == {"agent.d"}
    assert [m.path for m in structure.over()] == ["agent/f.py"]
    assert structure.folders == {"agent": 7, "db": 1, "tests": 1}


def test_the_command_prints_the_figures_of_this_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["structure"]) == 0
    printed = capsys.readouterr().out
    assert "largest product modules" in printed
    assert "import cycles with lazy and TYPE_CHECKING imports: 0" in printed
