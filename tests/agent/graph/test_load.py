"""The graph under load and after /forget: many concurrent memory searches in one process all answer,
and no read brings back (or creates) the graph of a user who was forgotten or never existed.
Real embedded FalkorDB; graphiti's LLM scripted."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from agent.context.facts import STANDARD
from agent.graph import GROUPS, STANDARD_LIMITS, GraphError, GroupLimits, group_id
from agent.graph.graphiti_backend import GraphitiGraph
from agent.memory.graph import GraphFacts, fact_line
from bench.clock import FrozenClock

from .conftest import GraphFactory

pytestmark = pytest.mark.process

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
SEARCHES = 100


async def test_a_hundred_concurrent_memory_searches_all_answer(
    graph: GraphitiGraph, clock: FrozenClock
) -> None:
    user = ["I work at Acme", "I play the cello"]
    await graph.add_episode(7, "user", "c1", ". ".join(user), T0, "c1", facts=user)
    await graph.add_episode(7, "relationship", "c1", "-", T0, "c1", facts=["We joked about the Mug"])
    await graph.add_episode(7, "persona", "life", "-", T0, "e1", facts=["Nikita visited Lisbon"])
    # The search's own deadline is generous here: this is about connections, not a shared machine's speed.
    facts = GraphFacts(graph, clock=clock, timeout_seconds=120)

    async def lines() -> set[str]:
        found = await facts.search(7, "Acme cello Mug Lisbon", limits=STANDARD, now=NOW)
        return {fact_line(f) for f in found.all()}

    answers = await asyncio.gather(*(lines() for _ in range(SEARCHES)), return_exceptions=True)

    # A failing graph raises GraphError (recall then goes on with the list alone).
    failures = [a for a in answers if isinstance(a, BaseException)]
    assert failures == []
    expected = {
        "I work at Acme (since 2026-01-05)",
        "I play the cello (since 2026-01-05)",
        "together: We joked about the Mug (since 2026-01-05)",
        "your own life: Nikita visited Lisbon (since 2026-01-05)",
    }
    assert [a for a in answers if isinstance(a, BaseException) or set(a) != expected] == []


async def test_a_search_that_finds_no_free_connection_in_time_is_a_graph_error(
    open_graph: GraphFactory,
) -> None:
    graph = await open_graph(max_connections=4, connection_wait_seconds=0.05)
    await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "c1")
    pool = graph.connection.pool
    assert pool is not None
    held = [await pool.get_connection() for _ in range(pool.max_connections)]
    try:
        with pytest.raises(GraphError):
            await graph.search(7, "Acme", limits=STANDARD_LIMITS, now=NOW)
    finally:
        for connection in held:
            await pool.release(connection)
    assert [f.text for f in (await graph.search(7, "Acme", limits=STANDARD_LIMITS, now=NOW)).user] == [
        "I work at Acme"
    ]


async def _read_everything(graph: GraphitiGraph, user_id: int) -> None:
    """Every read a turn, the voice context and /export make, for one user."""
    facts = GraphFacts(graph, clock=FrozenClock(NOW), timeout_seconds=30)
    assert len(await facts.search(user_id, "Acme cello", limits=STANDARD, now=NOW)) == 0
    assert len(await graph.search(user_id, "", limits=STANDARD_LIMITS, now=NOW)) == 0  # the voice context
    tools = GroupLimits(user=8, relationship=8, persona=0)  # memory_search
    assert len(await graph.search(user_id, "where do I work", limits=tools, now=NOW)) == 0
    exported = await graph.export_user(user_id)
    assert all(exported["groups"][g] == {"episodes": [], "facts": [], "entities": []} for g in GROUPS)


async def test_reads_never_create_a_forgotten_users_graph(graph: GraphitiGraph) -> None:
    await graph.add_episode(7, "user", "c1", "I work at Acme. I play the cello.", T0, "c1")
    await graph.add_episode(8, "user", "c1", "I live in Oslo.", T0, "c1")
    assert len(await graph.search(7, "Acme", limits=STANDARD_LIMITS, now=NOW)) >= 1

    await graph.forget_user(7)
    await _read_everything(graph, 7)

    names = await graph.connection.graph_names()
    assert [name for name in names if name.startswith("u7_")] == []
    assert group_id(8, "user") in names


async def test_reads_never_create_a_graph_for_an_unknown_user(graph: GraphitiGraph) -> None:
    before = await graph.connection.graph_names()

    await _read_everything(graph, 424242)
    assert await graph.connection.graph_names() == before

    await graph.forget_user(424242)  # nothing to forget: creates nothing either
    assert await graph.connection.graph_names() == before
    assert not any("424242" in name for name in before)
