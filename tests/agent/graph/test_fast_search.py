"""The indexed read path: the RediSearch query it sends, graphiti's RRF fusion, the fallback."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent.graph import STANDARD_LIMITS, group_id
from agent.graph.fast_search import MAX_QUERY_WORDS, fuse, text_query
from agent.graph.graphiti_backend import GraphitiGraph

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)


def _row(uuid: str, method: str, score: float) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "fact": f"fact {uuid}",
        "valid_at": None,
        "invalid_at": None,
        "score": score,
        "method": method,
    }


def test_fuse_ranks_by_reciprocal_rank_over_both_methods() -> None:
    found = [
        # Vector scores are cosine distances (smaller is closer), in any order from the index.
        _row("b", "vector", 0.30),
        _row("a", "vector", 0.10),
        _row("c", "vector", 0.50),
        # Text rows arrive best first.
        _row("c", "text", 9.0),
        _row("d", "text", 4.0),
    ]
    # a: 1/1; b: 1/2; c: 1/3 + 1/1; d: 1/2. Ties keep the vector order (b before d).
    assert [fact.uuid for fact in fuse(found, 10)] == ["c", "a", "b", "d"]
    assert [fact.uuid for fact in fuse(found, 2)] == ["c", "a"]
    assert fuse([], 5) == []
    # The newest facts fill what no method matched, after every matched fact, each once.
    recent = [_row("e", "recent", 0.0), _row("a", "recent", 0.0), _row("f", "recent", 0.0)]
    assert [fact.uuid for fact in fuse([*found, *recent], 6)] == ["c", "a", "b", "d", "e", "f"]
    assert [fact.uuid for fact in fuse(recent, 2)] == ["e", "a"]


def test_fuse_counts_a_repeated_fact_once_per_method() -> None:
    found = [
        {**_row("r1", "text", 5.0), "fact": "I like coffee"},
        {**_row("r2", "text", 5.0), "fact": "I like  Coffee"},
        {**_row("r3", "text", 5.0), "fact": "i like coffee"},
        _row("x", "text", 3.5),
        _row("x", "vector", 0.2),
    ]
    # x is second in text (not fourth) and first in vector: it wins, and the repeats come back once.
    fused = fuse(found, 10)
    assert [fact.uuid for fact in fused] == ["x", "r1"]
    assert fused[1].fact == "I like coffee"


def test_text_query_drops_stopwords_and_bounds_long_messages() -> None:
    assert text_query("what is the name of my cat?") == " (name | my | cat)"
    assert text_query("the a of") == ""
    long = text_query(" ".join(f"word{i}" for i in range(500)))
    assert long.count("|") == MAX_QUERY_WORDS - 1


@pytest.mark.process
async def test_a_group_without_its_vector_index_is_answered_by_graphitis_search(
    graph: GraphitiGraph,
) -> None:
    # FalkorDB refuses the vector procedure while it builds a group's index (seen right after a
    # group's first edges); a dropped index is refused the same way, deterministically.
    await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "c1")
    scope = await graph.graphiti_for(group_id(7, "user"))
    await scope.driver.execute_query("DROP VECTOR INDEX FOR ()-[r:RELATES_TO]-() ON (r.fact_embedding)")

    results = await graph.search(7, "Acme", limits=STANDARD_LIMITS, now=T0)

    assert [f.text for f in results.user] == ["I work at Acme"]
