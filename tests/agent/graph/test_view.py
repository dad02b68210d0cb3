"""The user group as a view of the list: an edge points back to every fact that says it, and taking
facts back ends an edge only when no fact it stands on is left. Real embedded FalkorDB, scripted
graph LLM."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.graph import STANDARD_LIMITS, ListedFact
from agent.graph.graphiti_backend import GraphitiGraph
from bench.fakes.graph_llm import ScriptedLLMClient

from .conftest import GraphFactory

pytestmark = pytest.mark.process

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


async def cello(graph: GraphitiGraph, user: int = 7) -> list[tuple[str, tuple[int, ...]]]:
    found = await graph.search(user, "cello", limits=STANDARD_LIMITS, now=NOW)
    return [(f.text, f.row_ids) for f in found.user]


async def test_an_edge_ends_only_when_every_fact_it_stands_on_is_taken_back(open_graph: GraphFactory) -> None:
    llm = ScriptedLLMClient()
    graph = await open_graph(llm)
    # The same words from two facts of the list (told twice): one edge, pointing back to both.
    await graph.add_facts(7, [ListedFact(1, "I play the cello", T0, (10,))])
    await graph.add_facts(7, [ListedFact(2, "I play the cello", T0 + timedelta(days=3), (20, 21))])
    await graph.add_facts(8, [ListedFact(3, "I play the cello", T0)])
    assert await cello(graph) == [("I play the cello", (1, 2))]
    exported = (await graph.export_user(7))["groups"]["user"]
    assert sorted(e["name"] for e in exported["episodes"]) == ["fact:1 messages:10", "fact:2 messages:20,21"]

    # Another user's fact ids end nothing of this user's, and this user's nothing of theirs.
    assert await graph.end_facts(8, [1, 2], NOW) == 0
    assert await cello(graph) == [("I play the cello", (1, 2))]

    # One fact taken back: the edge stays, standing on the other.
    assert await graph.end_facts(7, [1], NOW - timedelta(days=1)) == 0
    assert await cello(graph) == [("I play the cello", (2,))]
    # The other too: the edge ends then, kept in /export as history.
    assert await graph.end_facts(7, [2], NOW - timedelta(hours=1)) == 1
    assert await cello(graph) == []
    (fact,) = (await graph.export_user(7))["groups"]["user"]["facts"]
    assert fact["invalid_at"] == (NOW - timedelta(hours=1)).isoformat()
    assert await cello(graph, 8) == [("I play the cello", (3,))]

    # Writing a fact already written adds nothing, and asks no model.
    calls = len(llm.calls)
    await graph.add_facts(8, [ListedFact(3, "I play the cello", T0)])
    assert len(llm.calls) == calls and await cello(graph, 8) == [("I play the cello", (3,))]
    # A fact taken back and held again is written anew: the ended edge of its words stands on it again.
    await graph.add_facts(7, [ListedFact(2, "I play the cello", T0)])
    assert len(llm.calls) == calls and await cello(graph) == [("I play the cello", (2,))]
