"""The graph's per-group state stays bounded: scopes are an LRU, write locks live only while
in use, and a group whose scope was evicted still reads and writes correctly. Real falkordblite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.graph import STANDARD_LIMITS
from agent.graph.connect import open_connection
from agent.graph.graphiti_backend import GraphitiGraph
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedLLMClient
from bench.fakes.hashing_embedder import HashingEmbedder

from .conftest import HAVE_FALKORDBLITE, IN_CI

pytestmark = pytest.mark.process

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
SCOPES = 6


@pytest.fixture
async def small_graph(tmp_path: Path, clock: FrozenClock) -> AsyncIterator[GraphitiGraph]:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")
    connection = await open_connection("falkordblite", path=str(tmp_path / "graph.db"))
    graph = GraphitiGraph(
        connection, llm_client=ScriptedLLMClient(), embedder=HashingEmbedder(), clock=clock, max_scopes=SCOPES
    )
    await graph.start()
    yield graph
    await graph.close()


async def test_scopes_and_write_locks_stay_bounded(small_graph: GraphitiGraph) -> None:
    companies = {1: "Acme", 2: "Brill", 3: "Crane", 4: "Delta", 5: "Ember"}
    users = list(companies)  # 10 groups written (reads never open an unwritten one) for 6 scopes
    await asyncio.gather(
        *(
            small_graph.add_episode(u, group, "c", f"I work at {name}.", T0, f"c{u}")
            for u, name in companies.items()
            for group in ("user", "relationship")
        )
    )
    assert small_graph.cache_sizes() == {"scopes": SCOPES, "write_locks": 0}
    for user_id in users:  # a search reads all three groups of a user
        await small_graph.search(user_id, "work", limits=STANDARD_LIMITS, now=NOW)
        assert small_graph.cache_sizes()["scopes"] <= SCOPES
    assert small_graph.cache_sizes()["scopes"] == SCOPES
    # User 1's scopes were evicted long ago: reading and writing its groups still works.
    found = await small_graph.search(1, "Where does the user work? Acme", limits=STANDARD_LIMITS, now=NOW)
    assert [fact.text for fact in found.user][:1] == ["I work at Acme"]
    await small_graph.add_episode(1, "user", "c", "I love Sushi.", T0, "c-again")
    assert small_graph.cache_sizes() == {"scopes": SCOPES, "write_locks": 0}
