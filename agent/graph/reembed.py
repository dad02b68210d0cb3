"""Re-embedding the knowledge graph with the current EMBEDDER (`python -m bot reindex`).

graphiti stores three kinds of vectors: an entity's name (`Entity.name_embedding`), a fact
(`RELATES_TO.fact_embedding`) and a community's name (`Community.name_embedding`; we build no
communities, but a group that has some gets them re-embedded too). Each is embedded again from the
text graphiti embedded it from, as graphiti does (a document, line breaks as spaces), in batches,
written back in one query per batch; then the group's record (agent/graph/vector_space.py) names
the current embedder, and from the next start the group's vector search is on again.

On FalkorDB the group's vector index on facts (agent/graph/fast_search.py) has a fixed width: it is
dropped before the facts are rewritten and created again after, so a change of width gets an index
of the new width, and the index is built once instead of updated per rewritten fact.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from graphiti_core.driver.driver import GraphDriver, GraphProvider

from agent.graph.connect import GraphConnection
from agent.graph.fast_search import ensure_vector_index
from agent.graph.records import rows
from agent.graph.vector_space import group_driver, write_space
from agent.search.embeddings import Embedder

logger = logging.getLogger(__name__)

Kind = Literal["entity", "fact", "community"]
KINDS: tuple[Kind, ...] = ("entity", "fact", "community")
# Texts per embedding call and per write: one request of a hosted model, a few runs of MiniLM.
BATCH_SIZE = 64

_TEXTS: dict[Kind, str] = {
    "entity": "MATCH (n:Entity) WHERE n.group_id = $gid RETURN n.uuid AS uuid, n.name AS text",
    "fact": "MATCH ()-[e:RELATES_TO]->() WHERE e.group_id = $gid RETURN e.uuid AS uuid, e.fact AS text",
    "community": "MATCH (n:Community) WHERE n.group_id = $gid RETURN n.uuid AS uuid, n.name AS text",
}
_COUNT: dict[Kind, str] = {
    "entity": "MATCH (n:Entity) WHERE n.group_id = $gid RETURN count(n) AS n",
    "fact": "MATCH ()-[e:RELATES_TO]->() WHERE e.group_id = $gid RETURN count(e) AS n",
    "community": "MATCH (n:Community) WHERE n.group_id = $gid RETURN count(n) AS n",
}
# As graphiti writes them: FalkorDB's vecf32, Neo4j's vector-property procedures.
_FALKOR_WRITE: dict[Kind, str] = {
    "entity": (
        "UNWIND $rows AS row MATCH (n:Entity {uuid: row.uuid}) SET n.name_embedding = vecf32(row.vector)"
    ),
    "fact": (
        "UNWIND $rows AS row MATCH ()-[e:RELATES_TO {uuid: row.uuid}]->() "
        "SET e.fact_embedding = vecf32(row.vector)"
    ),
    "community": (
        "UNWIND $rows AS row MATCH (n:Community {uuid: row.uuid}) SET n.name_embedding = vecf32(row.vector)"
    ),
}
_NEO4J_WRITE: dict[Kind, str] = {
    "entity": (
        "UNWIND $rows AS row MATCH (n:Entity {uuid: row.uuid}) "
        "WITH n, row CALL db.create.setNodeVectorProperty(n, 'name_embedding', row.vector)"
    ),
    "fact": (
        "UNWIND $rows AS row MATCH ()-[e:RELATES_TO {uuid: row.uuid}]->() "
        "WITH e, row CALL db.create.setRelationshipVectorProperty(e, 'fact_embedding', row.vector)"
    ),
    "community": (
        "UNWIND $rows AS row MATCH (n:Community {uuid: row.uuid}) "
        "WITH n, row CALL db.create.setNodeVectorProperty(n, 'name_embedding', row.vector)"
    ),
}
_INDEXES = (
    "CALL db.indexes() YIELD label, options, entitytype "
    "WHERE entitytype = 'RELATIONSHIP' RETURN label, options"
)
_DROP_INDEX = "DROP VECTOR INDEX FOR ()-[r:RELATES_TO]-() ON (r.fact_embedding)"

Progress = Callable[[str, int], None]
"""Told the group and how many vectors were just rewritten, after each batch."""


@dataclass
class ReembedStats:
    """What a re-embedding rewrote."""

    groups: int = 0
    entities: int = 0
    facts: int = 0
    communities: int = 0

    @property
    def vectors(self) -> int:
        """Every vector rewritten."""
        return self.entities + self.facts + self.communities

    def add(self, kind: Kind, count: int) -> None:
        """Count `count` rewritten vectors of one kind."""
        if kind == "entity":
            self.entities += count
        elif kind == "fact":
            self.facts += count
        else:
            self.communities += count


async def present_groups(connection: GraphConnection, gids: Sequence[str]) -> list[str]:
    """The groups of `gids` whose graph exists (all of them on Neo4j, whose groups share one database)."""
    return [gid for gid in gids if await connection.has_graph(gid)]


async def count_vectors(connection: GraphConnection, gids: Sequence[str]) -> int:
    """How many vectors the groups hold: the total a progress bar counts to."""
    total = 0
    for gid in gids:
        driver = group_driver(connection.driver, gid)
        for kind in KINDS:
            found = await rows(driver, _COUNT[kind], gid=gid)
            total += int(found[0]["n"]) if found else 0
    return total


async def reembed_groups(
    connection: GraphConnection,
    embedder: Embedder,
    gids: Sequence[str],
    *,
    batch_size: int = BATCH_SIZE,
    progress: Progress | None = None,
) -> ReembedStats:
    """Embed every vector of the groups again with `embedder` and record it; groups absent are skipped.

    Only the groups named are read or written: another user's groups are never touched.
    """
    stats = ReembedStats()
    for gid in await present_groups(connection, gids):
        await _reembed_group(group_driver(connection.driver, gid), gid, embedder, batch_size, stats, progress)
        stats.groups += 1
    return stats


async def _reembed_group(
    driver: GraphDriver,
    gid: str,
    embedder: Embedder,
    batch_size: int,
    stats: ReembedStats,
    progress: Progress | None,
) -> None:
    falkor = driver.provider == GraphProvider.FALKORDB
    if falkor:
        await _drop_vector_index(driver)
    writes = _FALKOR_WRITE if falkor else _NEO4J_WRITE
    for kind in KINDS:
        items = [
            (str(row["uuid"]), str(row["text"]).replace("\n", " "))
            for row in await rows(driver, _TEXTS[kind], gid=gid)
            if row["text"]  # graphiti embeds no empty name or fact either
        ]
        for start in range(0, len(items), batch_size):
            batch = items[start : start + batch_size]
            vectors = await embedder.embed([text for _, text in batch])
            payload = [
                {"uuid": uuid, "vector": [float(value) for value in vector]}
                for (uuid, _), vector in zip(batch, vectors, strict=True)
            ]
            await driver.execute_query(writes[kind], rows=payload)
            stats.add(kind, len(batch))
            if progress is not None:
                progress(gid, len(batch))
    if falkor:
        await ensure_vector_index(driver, embedder.dimensions)
    await write_space(driver, gid, (embedder.name, embedder.dimensions))
    logger.info("graph group re-embedded", extra={"group": gid, "embedder": embedder.name})


async def _drop_vector_index(driver: GraphDriver) -> None:
    """Drop the group's vector index on facts, if it has one (a group not opened since it was written
    may have none)."""
    indexes = await rows(driver, _INDEXES)
    if any(row["label"] == "RELATES_TO" and "fact_embedding" in (row["options"] or {}) for row in indexes):
        await driver.execute_query(_DROP_INDEX)
