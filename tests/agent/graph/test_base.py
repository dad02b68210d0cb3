"""The interface's value types, the tier limits and the graph switched off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from graphiti_core.helpers import validate_group_id

from agent.core.errors import ConfigurationError
from agent.graph import (
    CRITICAL_LIMITS,
    FULL_LIMITS,
    GROUPS,
    STANDARD_LIMITS,
    EdgeFact,
    GraphResults,
    ListedFact,
    NullGraph,
    group_id,
    limits_for_budget,
    open_graph,
)
from agent.graph.connect import open_connection
from bench.clock import FrozenClock

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("remaining", "expected"),
    [
        (0, CRITICAL_LIMITS),
        (3999, CRITICAL_LIMITS),
        (4000, STANDARD_LIMITS),
        (8000, STANDARD_LIMITS),
        (8001, FULL_LIMITS),
    ],
)
def test_limits_follow_the_remaining_budget(remaining: int, expected: object) -> None:
    assert limits_for_budget(remaining) == expected


def test_tier_limits_are_the_seeds() -> None:
    assert [CRITICAL_LIMITS.of(g) for g in GROUPS] == [20, 10, 5]
    assert [STANDARD_LIMITS.of(g) for g in GROUPS] == [50, 30, 20]
    assert [FULL_LIMITS.of(g) for g in GROUPS] == [100, 50, 30]


def test_group_ids_are_valid_for_graphiti_and_distinct() -> None:
    ids = {group_id(user, group) for user in (1, 12, 123) for group in GROUPS}
    assert len(ids) == 9
    assert all(validate_group_id(gid) for gid in ids)
    assert group_id(42, "relationship") == "u42_relationship"


def test_a_fact_ended_before_now_is_not_current() -> None:
    ended = EdgeFact("user", "I live in Paris", NOW - timedelta(days=60), NOW - timedelta(days=20))
    ongoing = EdgeFact("user", "I moved to Berlin", NOW - timedelta(days=20), None)
    ends_later = EdgeFact("user", "I am in Rome this week", NOW, NOW + timedelta(days=3))
    assert not ended.is_current(NOW)
    assert ongoing.is_current(NOW) and ends_later.is_current(NOW)
    results = GraphResults(user=[ongoing], persona=[ends_later])
    assert len(results) == 2 and results.all() == [ongoing, ends_later] and results.of("relationship") == []


async def test_backend_none_remembers_nothing_and_never_fails(clock: FrozenClock) -> None:
    graph = await open_graph("none", url=None, path="unused", llm_client=None, embedder=None, clock=clock)
    assert isinstance(graph, NullGraph)

    await graph.add_facts(1, [ListedFact(1, "I live in Paris.", NOW)])
    assert await graph.end_facts(1, [1], NOW) == 0
    results = await graph.search(1, "Paris", limits=FULL_LIMITS, now=NOW)
    await graph.forget_user(1)
    exported = await graph.export_user(1)
    await graph.close()

    assert len(results) == 0
    assert exported["backend"] == "none" and set(exported["groups"]) == set(GROUPS)


async def test_a_server_backend_needs_a_url() -> None:
    with pytest.raises(ConfigurationError, match="GRAPH_URL"):
        await open_connection("falkordb", url=None)
    with pytest.raises(ConfigurationError, match="falkor://"):
        await open_connection("falkordb", url="http://localhost:6379")


async def test_a_neo4j_url_keeps_credentials_out_of_the_uri() -> None:
    # A closed local port: nothing is reached, the driver only connects lazily.
    connection = await open_connection("neo4j", url="neo4j://neo:s%40cret@127.0.0.1:9/memory")
    try:
        assert connection.backend == "neo4j"
        assert connection.driver._database == "memory"
    finally:
        await connection.close()
