"""Extracted facts written as triplets: one model call per fact at most, and graphiti's
temporal invalidation and deduplication still hold. Real embedded FalkorDB, scripted graph LLM."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from graphiti_core.llm_client.errors import RateLimitError

from agent.graph import STANDARD_LIMITS, GraphError, ListedFact, group_id
from agent.graph.base import Group
from agent.graph.graphiti_backend import GraphitiGraph
from agent.graph.records import rows
from bench.fakes.graph_llm import ScriptedCall, ScriptedLLMClient

from .conftest import GraphFactory
from .test_graphiti_backend import contradict_where_one_lives

pytestmark = pytest.mark.process

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


async def write(
    graph: GraphitiGraph, source: str, facts: list[str], at: datetime, user: int = 7, group: Group = "user"
) -> None:
    await graph.add_episode(user, group, source, "\n".join(facts), at, source, facts=facts)


async def edges_stating(
    graph: GraphitiGraph, text: str, user: int = 7, group: Group = "user"
) -> list[dict[str, Any]]:
    scope = await graph.graphiti_for(group_id(user, group))
    return await rows(
        scope.driver,
        "MATCH ()-[r:RELATES_TO]->() WHERE r.fact = $fact RETURN r.uuid AS uuid, r.episodes AS episodes",
        fact=text,
    )


async def test_paris_then_berlin_gives_berlin_and_keeps_paris_as_history(open_graph: GraphFactory) -> None:
    llm = ScriptedLLMClient({"EdgeDuplicate": contradict_where_one_lives})
    graph = await open_graph(llm)
    await write(graph, "conversation:1:user", ["I live in Paris.", "I play the cello."], T0)
    assert llm.calls[0].response_model == "EdgeDuplicate"  # the cello was checked against Paris
    moved_at = T0 + timedelta(weeks=5)
    before = len(llm.calls)
    await write(graph, "conversation:2:user", ["I moved to Berlin."], moved_at)

    # One call for the one new fact: no entity, edge or timestamp extraction.
    assert [c.response_model for c in llm.calls[before:]] == ["EdgeDuplicate"]
    assert "Paris" in llm.calls[-1].text
    results = await graph.search(7, "where does the user live Paris Berlin", limits=STANDARD_LIMITS, now=NOW)
    # Berlin matches; the cello follows as the newest other fact; Paris is gone.
    assert [f.text for f in results.user] == ["I moved to Berlin", "I play the cello"]
    newest = await graph.search(7, "", limits=STANDARD_LIMITS, now=NOW)
    assert [f.text for f in newest.user] == ["I moved to Berlin", "I play the cello"]
    exported = await graph.export_user(7)
    paris = next(f for f in exported["groups"]["user"]["facts"] if "Paris" in f["fact"])
    assert paris["invalid_at"] == moved_at.isoformat() and paris["expired_at"] is not None


async def test_moments_and_thoughts_ask_no_model_while_a_fact_is_still_checked(
    open_graph: GraphFactory,
) -> None:
    llm = ScriptedLLMClient({"EdgeDuplicate": contradict_where_one_lives})
    graph = await open_graph(llm)
    await write(graph, "fact:1", ["I live in Paris."], T0)
    for day in (1, 2):
        at = T0 + timedelta(days=day)
        await write(
            graph, f"moments:{day}", ["We went hiking", f"We cooked dish {day}"], at, group="relationship"
        )
        await write(graph, f"thought:{day}", ["I wonder how the move went."], at, group="persona")
    assert llm.calls == []  # dated events: nothing to contradict, so no dedupe call
    await write(graph, "fact:2", ["I moved to Berlin."], T0 + timedelta(weeks=5))

    assert [c.response_model for c in llm.calls] == ["EdgeDuplicate"]
    found = await graph.search(7, "where do we live hiking cooked move", limits=STANDARD_LIMITS, now=NOW)
    assert [f.text for f in found.user] == ["I moved to Berlin"]
    assert sorted(f.text for f in found.relationship) == [
        "We cooked dish 1",
        "We cooked dish 2",
        "We went hiking",
    ]
    assert [f.text for f in found.persona] == ["I wonder how the move went"]
    # The same words in another episode of the group are one edge pointing back to both.
    for text, group in (("We went hiking", "relationship"), ("I wonder how the move went", "persona")):
        (stated,) = await edges_stating(graph, text, group=group)  # type: ignore[arg-type]
        assert len(stated["episodes"]) == 2


async def test_the_same_fact_told_twice_is_one_edge_without_a_model_call(graph: GraphitiGraph) -> None:
    llm = graph.llm_client
    assert isinstance(llm, ScriptedLLMClient)
    await write(graph, "conversation:1:user", ["I work at Acme."], T0)
    assert llm.calls == []  # the group's first fact has nothing to compare with
    await write(graph, "conversation:2:user", ["I work at Acme"], T0 + timedelta(days=3))

    assert llm.calls == []  # a verbatim repeat is folded in by graphiti without asking
    stated = await edges_stating(graph, "I work at Acme")
    assert len(stated) == 1 and len(stated[0]["episodes"]) == 2


async def test_a_fact_the_model_calls_a_duplicate_is_one_edge(open_graph: GraphFactory) -> None:
    def same_job(call: ScriptedCall) -> dict[str, Any]:
        existing = call.json_section("EXISTING FACTS") or []
        return {
            "duplicate_facts": [c["idx"] for c in existing if "Acme" in c["fact"]],
            "contradicted_facts": [],
        }

    graph = await open_graph(ScriptedLLMClient({"EdgeDuplicate": same_job}))
    await write(graph, "conversation:1:user", ["I work at Acme."], T0)
    await write(graph, "conversation:2:user", ["My job is at Acme."], T0 + timedelta(days=3))

    assert len(await edges_stating(graph, "I work at Acme")) == 1
    assert await edges_stating(graph, "My job is at Acme") == []
    results = await graph.search(7, "Acme job", limits=STANDARD_LIMITS, now=NOW)
    assert [f.text for f in results.user] == ["I work at Acme"]


async def test_a_rerun_after_a_failure_completes_without_duplicates(open_graph: GraphFactory) -> None:
    failures = iter([False, True])

    def flaky(call: ScriptedCall) -> dict[str, Any]:
        if next(failures, False):
            raise RateLimitError("model overloaded")  # type: ignore[no-untyped-call]
        return {"duplicate_facts": [], "contradicted_facts": []}

    llm = ScriptedLLMClient({"EdgeDuplicate": flaky})
    graph = await open_graph(llm)
    facts = ["I work at Acme.", "I love Sushi.", "I have a dog."]
    with pytest.raises(GraphError):
        await write(graph, "conversation:1:user", facts, T0)

    await write(graph, "conversation:1:user", facts, T0)
    await write(graph, "conversation:1:user", facts, T0)  # complete: skipped

    for fact in ("I work at Acme", "I love Sushi", "I have a dog"):
        assert len(await edges_stating(graph, fact)) == 1
    exported = await graph.export_user(7)
    assert [e["source"] for e in exported["groups"]["user"]["episodes"]] == ["conversation:1:user"]


async def test_memory_add_writes_one_fact_and_users_stay_apart(graph: GraphitiGraph) -> None:
    await graph.add_facts(7, [ListedFact(1, "My sister is called Anna.", T0)])
    await graph.add_facts(8, [ListedFact(2, "My brother is called Ben.", T0)])

    mine = await graph.search(7, "sister brother Anna Ben", limits=STANDARD_LIMITS, now=NOW)
    theirs = await graph.search(8, "sister brother Anna Ben", limits=STANDARD_LIMITS, now=NOW)
    assert [f.text for f in mine.all()] == ["My sister is called Anna"]
    assert [f.text for f in theirs.all()] == ["My brother is called Ben"]
