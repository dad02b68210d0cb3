"""The embedded graph is one process's: a second process is refused, and gets it once the first closes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agent.core.errors import EmbeddedGraphInUseError
from agent.graph.connect import open_connection

from .conftest import HAVE_FALKORDBLITE, IN_CI

pytestmark = pytest.mark.process

OPEN_IN_CHILD = """
import asyncio, sys
from agent.graph.connect import open_connection
from agent.core.errors import EmbeddedGraphInUseError

async def main() -> int:
    try:
        connection = await open_connection("falkordblite", path=sys.argv[1])
    except EmbeddedGraphInUseError as exc:
        print(exc)
        return 3
    await connection.driver.execute_query("MERGE (n:Probe {name: 'child'})")
    await connection.close()
    print("opened")
    return 0

sys.exit(asyncio.run(main()))
"""


async def _child(path: Path) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        OPEN_IN_CHILD,
        str(path),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode().strip()


async def test_a_second_process_is_refused_while_the_graph_is_open(tmp_path: Path) -> None:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed (CI always installs it and runs these tests)")
    path = tmp_path / "graph.db"
    first = await open_connection("falkordblite", path=str(path))
    try:
        await first.driver.execute_query("MERGE (n:Probe {name: 'first'})")

        code, said = await _child(path)

        assert code == 3
        assert f"pid {os.getpid()}" in said and "stop it first" in said
        # The refused opener stopped nothing: the first process's server still answers.
        records, _, _ = await first.driver.execute_query("MATCH (n:Probe) RETURN n.name AS name")
        assert [r["name"] for r in records] == ["first"]
        with pytest.raises(EmbeddedGraphInUseError):
            await open_connection("falkordblite", path=str(path))
    finally:
        await first.close()

    code, said = await _child(path)

    assert (code, said) == (0, "opened")
