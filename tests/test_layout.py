"""The product's layout: `bot`, `agent`, `db` and `jobs` import nothing from the tests or benchmarks,
the benchmarks nothing from the tests, no module imports itself back through others (at import time,
inside a function or under `TYPE_CHECKING`), no module grows past the size limit, and `agent/`'s
folders stack in layers.

The layers, lowest first (a folder imports only folders in layers below its own; imports at load
time, inside functions and under `TYPE_CHECKING` all count, those naming a folder's package itself,
`from agent.graph import X`, and those its `__init__` makes too):

    core < history < account < search < graph < memory < reminders < chat < digest < context
    < onboarding < turn < touchpoints, voice, reports

- core: settings, clock and local time, errors, caches, usage, token counting, the model factory
  (the offline demo model too); it imports no other folder.
- history below account: the account's timeline shows stored answers with their reactions.
- account below search: search reads whose writes are guarded (`writers`) and who is a group.
- search below graph, graph below memory: the graph embeds with search's embedders, and the memory
  recalls facts through search and the graph.
- reminders below chat: the agent's reminder tools store and schedule reminders.
- chat below digest and context: digests and the context's briefings are written in the persona's
  name.
- digest below context: the context quotes day summaries and compacts group digests.
- onboarding below turn: the onboarding agent and its context are what the onboarding turn runs
  (agent/turn/onboarding_turn.py), so every kind of turn is one of `TurnService`'s.
- turn above context: a turn is handed its context builder; nothing below a turn runs one.
- the top three are built on the turns and import none of each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bench.structure import LINE_LIMIT, Structure, scan

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("bot", "agent", "db", "jobs")
OUTSIDE = ("tests", "bench")
# agent/'s folders, lowest layer first; the docstring above says why each sits where it does.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("history",),
    ("account",),
    ("search",),
    ("graph",),
    ("memory",),
    ("reminders",),
    ("chat",),
    ("digest",),
    ("context",),
    ("onboarding",),
    ("turn",),
    ("touchpoints", "voice", "reports"),
)


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


def test_the_benchmarks_import_no_tests() -> None:
    importers = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "bench").rglob("*.py"))
        if any(
            name.split(".")[0] == "tests" for name in _imported(ast.parse(path.read_text(encoding="utf-8")))
        )
    ]
    assert importers == []
    # The scan sees the benchmarks' imports: the fixed clock they share with the tests is theirs.
    assert "bench.clock" in _imported(ast.parse((ROOT / "bench" / "turn.py").read_text(encoding="utf-8")))


def test_no_import_cycle_and_no_module_over_the_limit() -> None:
    structure = scan(ROOT)
    assert structure.eager_cycles == []
    assert structure.all_cycles == []  # lazy (function-level) and TYPE_CHECKING imports included
    assert [m.path for m in structure.over(LINE_LIMIT)] == []
    # The scan sees the product and its imports.
    assert "agent.chat.tools" in structure.modules["agent.chat.agent"].eager
    assert len(structure.modules) > 200


def _folder(structure: Structure, module: str) -> str | None:
    """The folder of agent/ a module lives in, for its package (`agent.graph`, its `__init__`) too."""
    parts = Path(structure.modules[module].path).parts
    return parts[1] if parts[0] == "agent" and len(parts) > 2 else None


def _folder_imports(structure: Structure) -> dict[tuple[str, str], list[str]]:
    """Every import from one of agent/'s folders into another: (importer, imported) -> "module -> module"."""
    found: dict[tuple[str, str], list[str]] = {}
    for name, module in sorted(structure.modules.items()):
        importer = _folder(structure, name)
        for kind, targets in (("eager", module.eager), ("lazy", module.lazy), ("typing", module.typing)):
            for target in sorted(targets):
                imported = _folder(structure, target)
                if importer and imported and imported != importer:
                    found.setdefault((importer, imported), []).append(f"{name} -> {target} ({kind})")
    return found


def test_agent_folders_import_only_the_layers_below_them() -> None:
    structure = scan(ROOT)
    rank = {folder: index for index, layer in enumerate(LAYERS) for folder in layer}
    folders = {folder for name in structure.modules if (folder := _folder(structure, name))}
    assert folders == set(rank), "every folder of agent/ with modules has its place in LAYERS"
    imports = _folder_imports(structure)
    climbing = [
        line
        for (importer, imported), lines in sorted(imports.items())
        if rank[imported] >= rank[importer]
        for line in lines
    ]
    assert climbing == [], "imports that climb the layers:\n" + "\n".join(climbing)
    # The scan sees the folders' imports, those under TYPE_CHECKING included, and those of a folder's
    # package itself (`from agent.graph import X`) and of its `__init__`.
    assert len(imports) > 40
    assert "agent.search.embeddings" in structure.modules["agent.graph.setup"].typing
    assert "agent.voice.context -> agent.graph (eager)" in imports[("voice", "graph")]
    assert "agent.graph -> agent.core.errors (eager)" in imports[("graph", "core")]


def test_no_two_agent_folders_import_each_other_around() -> None:
    imports = _folder_imports(scan(ROOT))
    below: dict[str, set[str]] = {}
    for importer, imported in imports:
        below.setdefault(importer, set()).add(imported)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = {start}, [start]
        while todo:
            for folder in below.get(todo.pop(), set()) - seen:
                if folder == goal:
                    return True
                seen.add(folder)
                todo.append(folder)
        return False

    # An import from one folder into another that leads back to the first is part of a cycle.
    in_cycles = [
        line
        for (importer, imported), lines in sorted(imports.items())
        if reaches(imported, importer)
        for line in lines
    ]
    assert in_cycles == [], "imports between folders that import each other around:\n" + "\n".join(in_cycles)
    assert sum(len(targets) for targets in below.values()) > 40


def test_the_turns_are_handed_a_kit_never_the_service() -> None:
    # A turn reads what it needs from its `TurnKit` (agent/turn/kit.py); only the package may name
    # the service that builds and runs the turns, at load time, lazily or under `TYPE_CHECKING`.
    structure = scan(ROOT)
    service = "agent.turn.service"
    importers = sorted(
        name
        for name, module in structure.modules.items()
        # "agent.turn" itself (its __init__) is the package, not a turn module.
        if name.startswith("agent.turn.") and service in module.imports
    )
    assert importers == []
    # The scan sees the turn modules and what the service imports from them; every turn is a
    # `Turn` of the frame, which holds the kit.
    assert {"agent.turn.chat_turn", "agent.turn.kit"} <= structure.modules[service].eager
    assert "agent.turn.kit" in structure.modules["agent.turn.frame"].eager
    assert "agent.turn.frame" in structure.modules["agent.turn.chat_turn"].eager


@pytest.mark.process
def test_bench_runs_from_the_bot_command_line() -> None:
    import subprocess
    import sys

    shown = subprocess.run(
        [sys.executable, "-m", "bot", "bench", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "python -m bot bench" in shown.stdout and "memory" in shown.stdout
