"""The facts tier's read path on FalkorDB: one query per group, ranked in process.

graphiti's edge search on FalkorDB computes the cosine of the query against every edge of the group
(no vector index is used) and runs BM25 as a second query, then loads each hit with all its
properties, the 384-float embedding included: p95 ~250-860 ms at 1,000 episodes per user. Here one
Cypher query per group asks FalkorDB's HNSW vector index on `RELATES_TO.fact_embedding` (created
per group graph, `ensure_vector_index`) and graphiti's own fulltext index, keeps current facts only,
returns four small fields, and the two rankings are fused in process with graphiti's RRF (rank
constant 1) and its minimum cosine. Neo4j keeps graphiti's search.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graphiti_core.driver.driver import GraphDriver
from graphiti_core.driver.falkordb.fulltext import build_falkor_fulltext_query
from redis.exceptions import ResponseError

from agent.graph.records import rows, to_datetime

logger = logging.getLogger(__name__)

# graphiti's DEFAULT_MIN_SCORE on its normalised cosine (2 - distance) / 2, as a cosine distance.
MAX_DISTANCE = 2 - 2 * 0.6
# Candidates per method: superseded facts are filtered after the index, so fetch some spare.
CANDIDATE_FACTOR = 2
# Words of the message sent to BM25 (graphiti gives up above 128; a long message keeps its start).
MAX_QUERY_WORDS = 48

# HNSW candidates examined per query (FalkorDB's default, 10, misses close facts among 10,000).
EF_RUNTIME = 200

# Question words and "I", on top of graphiti's stopwords (articles, prepositions): they match
# thousands of facts for nothing and cost the most time. Possessives stay: "my coffee" matters.
CHAT_STOPWORDS = frozenset(
    "i do does did how what when where who whom which why am is are was were be been can could would "
    "should will shall may might must about any anything some something just really very so also too "
    "please tell know".split()
)

# The episodes name the rows an edge comes from (agent/graph/view.py).
_FIELDS = (
    "r.uuid AS uuid, r.fact AS fact, r.valid_at AS valid_at, r.invalid_at AS invalid_at, "
    "r.episodes AS episodes"
)
_CURRENT = "r.expired_at IS NULL AND (r.invalid_at IS NULL OR r.invalid_at > $now)"
_VECTOR = f"""
CALL db.idx.vector.queryRelationships('RELATES_TO', 'fact_embedding', $k, vecf32($vector))
YIELD relationship AS r, score
WHERE {_CURRENT} AND score <= $max_distance
RETURN {_FIELDS}, score, 'vector' AS method
"""
_TEXT = f"""
CALL db.idx.fulltext.queryRelationships('RELATES_TO', $text)
YIELD relationship AS r, score
WHERE {_CURRENT}
RETURN {_FIELDS}, score, 'text' AS method
ORDER BY score DESC
LIMIT $k
"""
# The newest current facts fill what the message did not match: a vague message ("what did I tell
# you?") still reminds the model of the latest facts, as graphiti's search did through words like "I".
_RECENT = f"""
MATCH ()-[r:RELATES_TO]->()
WHERE {_CURRENT}
RETURN {_FIELDS}, 0.0 AS score, 'recent' AS method
ORDER BY r.valid_at DESC
LIMIT $limit
"""
_INDEX = (
    "CREATE VECTOR INDEX FOR ()-[r:RELATES_TO]-() ON (r.fact_embedding) "
    "OPTIONS {dimension: $dimensions, similarityFunction: 'cosine', efRuntime: $ef_runtime}"
)


@dataclass(frozen=True)
class FoundFact:
    """One current fact of a group, with the time it became true and the time it ends (if known)."""

    uuid: str
    fact: str
    valid_at: datetime | None
    invalid_at: datetime | None
    episodes: tuple[str, ...] = ()


def found_fact(row: dict[str, Any]) -> FoundFact:
    """A fact from a query's row (`uuid`, `fact`, `valid_at`, `invalid_at`, `episodes`)."""
    episodes = row.get("episodes")
    return FoundFact(
        str(row["uuid"]),
        str(row["fact"]),
        to_datetime(row["valid_at"]),
        to_datetime(row["invalid_at"]),
        tuple(str(e) for e in episodes) if isinstance(episodes, list | tuple) else (),
    )


async def ensure_vector_index(driver: GraphDriver, dimensions: int) -> None:
    """Create the group graph's vector index on fact embeddings (FalkorDB indexes existing edges too).

    graphiti's FalkorDriver answers an index that already exists with None (it logs "already indexed").
    """
    await driver.execute_query(_INDEX, dimensions=dimensions, ef_runtime=EF_RUNTIME)


def text_query(query: str) -> str:
    """The message as a RediSearch OR-query over its words (stopwords out), '' when nothing is left."""
    words = [w for w in query.split() if w.strip("?!.,;:'\"").lower() not in CHAT_STOPWORDS][:MAX_QUERY_WORDS]
    # graphiti counts the " | " separators as words too; the bound above is the real one.
    return build_falkor_fulltext_query(" ".join(words), None, max_query_length=4 * MAX_QUERY_WORDS)


async def search_group(
    driver: GraphDriver, query: str, vector: list[float] | None, *, limit: int, now: datetime
) -> list[FoundFact] | None:
    """The group's current facts for the message, best first: vector and BM25 ranks fused by RRF.

    None while FalkorDB is still building the group's vector index (it then refuses the procedure's
    arguments, seen right after a group's first edges): the caller asks graphiti's search instead.
    """
    if limit <= 0:
        return []
    text = text_query(query)
    parts = [*([_VECTOR] if vector is not None else []), *([_TEXT] if text else []), _RECENT]
    params: dict[str, Any] = {"k": limit * CANDIDATE_FACTOR, "limit": limit, "now": now}
    if vector is not None:
        params.update(vector=vector, max_distance=MAX_DISTANCE)
    if text:
        params["text"] = text
    try:
        found = await rows(driver, "\nUNION ALL\n".join(parts), **params)
    except ResponseError as exc:
        if "db.idx.vector.queryRelationships" not in str(exc):
            raise
        logger.info("vector index not ready, graphiti's search answers", extra={"error": str(exc)[:200]})
        return None
    return fuse(found, limit)


def fuse(found: list[dict[str, Any]], limit: int) -> list[FoundFact]:
    """graphiti's RRF over the distinct facts: each method's rank r adds 1 / (r + 1); then the newest.

    A fact told in many conversations is stored once per telling (as graphiti stores it); counted
    once per method here, so one fact repeated twenty times cannot fill a ranking and push out the
    one fact the question is about, and the prompt never shows the same line twice. Ties keep the
    vector order; a repeated fact is shown with its first (best-ranked) telling.
    """
    vector = sorted((r for r in found if r["method"] == "vector"), key=lambda r: float(r["score"]))
    text = [r for r in found if r["method"] == "text"]  # already best first
    scores: dict[str, float] = {}
    facts: dict[str, FoundFact] = {}
    for ranking in (vector, text):
        seen: set[str] = set()
        for row in ranking:
            key = " ".join(str(row["fact"]).lower().split())
            if key in seen:
                continue
            scores[key] = scores.get(key, 0.0) + 1.0 / (len(seen) + 1)
            seen.add(key)
            if key not in facts:
                facts[key] = found_fact(row)
    best = sorted(scores, key=lambda key: scores[key], reverse=True)
    for row in found:  # the newest facts, after every matched one
        key = " ".join(str(row["fact"]).lower().split())
        if row["method"] == "recent" and key not in facts:
            facts[key] = found_fact(row)
            best.append(key)
    return [facts[key] for key in best[:limit]]
