"""The production path: GRAPH_BACKEND=falkordb with GRAPH_URL, against falkordblite's server on a TCP port."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.graph import STANDARD_LIMITS, open_graph
from agent.graph.graphiti_backend import GraphitiGraph
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedLLMClient
from bench.fakes.hashing_embedder import HashingEmbedder

from .conftest import HAVE_FALKORDBLITE, IN_CI

pytestmark = pytest.mark.process


@pytest.fixture
def falkordb_url(tmp_path: Path) -> Iterator[str]:
    """A FalkorDB server (the redis-server + module falkordblite ships) listening on 127.0.0.1."""
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")
    from redislite import Redis  # type: ignore[import-untyped]

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = Redis(str(tmp_path / "server.db"), serverconfig={"port": str(port), "bind": "127.0.0.1"})
    try:
        yield f"falkor://127.0.0.1:{port}"
    finally:
        server._cleanup()  # falkordblite's own shutdown (what its __del__ calls)


async def test_a_falkordb_server_by_url_stores_searches_and_forgets(falkordb_url: str) -> None:
    graph = await open_graph(
        "falkordb",
        url=falkordb_url,
        path="unused",
        llm_client=ScriptedLLMClient(),
        embedder=HashingEmbedder(),
        clock=FrozenClock(),
    )
    assert isinstance(graph, GraphitiGraph) and graph.connection.backend == "falkordb"
    try:
        await graph.add_episode(1, "user", "c1", "I work at Acme.", datetime(2026, 1, 5, tzinfo=UTC), "c1")
        found = await graph.search(1, "Acme", limits=STANDARD_LIMITS, now=datetime(2026, 2, 1, tzinfo=UTC))
        assert [f.text for f in found.user] == ["I work at Acme"]

        await graph.forget_user(1)

        assert not [name for name in await graph.connection.graph_names() if name.startswith("u1_")]
    finally:
        await graph.close()
