"""Direct Cypher reads of one group (FalkorDB and Neo4j alike): newest facts and the /export dump."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from graphiti_core.driver.driver import GraphDriver
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.utils.datetime_utils import convert_datetimes_to_strings
from redis.exceptions import ResponseError

from agent.core.clock import ensure_utc

# Endpoints stay unlabelled on purpose: FalkorDB 4.x answers `(a:Entity)-[r]->(b:Entity) WHERE r.group_id
# = $gid` with no rows once the edge range index is used (seen at 1,500 edges); RELATES_TO only ever
# joins Entity nodes anyway.
_CURRENT_FACTS = """
MATCH (a)-[r:RELATES_TO]->(b)
WHERE r.group_id = $gid AND r.expired_at IS NULL AND (r.invalid_at IS NULL OR r.invalid_at > $now)
RETURN r.uuid AS uuid, r.fact AS fact, r.valid_at AS valid_at, r.invalid_at AS invalid_at,
       r.episodes AS episodes
ORDER BY r.valid_at DESC, r.created_at DESC
LIMIT $limit
"""
_EPISODES = """
MATCH (e:Episodic) WHERE e.group_id = $gid
RETURN e.uuid AS uuid, e.name AS name, e.content AS content, e.valid_at AS valid_at,
       e.source_description AS source
ORDER BY e.valid_at
"""
_FACTS = """
MATCH (a)-[r:RELATES_TO]->(b) WHERE r.group_id = $gid
RETURN r.uuid AS uuid, a.name AS source, r.name AS relation, b.name AS target, r.fact AS fact,
       r.valid_at AS valid_at, r.invalid_at AS invalid_at, r.expired_at AS expired_at
ORDER BY r.created_at
"""
_ENTITIES = """
MATCH (n:Entity) WHERE n.group_id = $gid
RETURN n.uuid AS uuid, n.name AS name, n.summary AS summary
ORDER BY n.name
"""


def to_datetime(value: Any) -> datetime | None:
    """A stored time as an aware datetime: FalkorDB keeps ISO strings, Neo4j its own DateTime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return ensure_utc(value)
    if isinstance(value, str):
        return ensure_utc(datetime.fromisoformat(value))
    native = value.to_native()  # neo4j.time.DateTime
    return ensure_utc(native) if isinstance(native, datetime) else None


def _iso(value: Any) -> str | None:
    moment = to_datetime(value)
    return moment.isoformat() if moment else None


def _query_params(params: dict[str, Any]) -> dict[str, Any]:
    """As graphiti's FalkorDriver sends them: times as ISO strings, text without NUL characters."""
    sent: dict[str, Any] = convert_datetimes_to_strings(params)  # type: ignore[no-untyped-call]
    return {key: v.replace("\x00", "") if isinstance(v, str) else v for key, v in sent.items()}


# FalkorDB's answer to a read of a graph that does not exist (it creates none).
_NO_GRAPH = "empty key"


async def rows(driver: GraphDriver, query: str, **params: Any) -> list[dict[str, Any]]:
    """Run a read query and return plain dicts (both drivers' record shapes).

    On FalkorDB as GRAPH.RO_QUERY: a plain query would create the graph it names, so a read racing
    /forget would bring the user's graph back; a read-only one finds no graph and returns no rows.
    """
    if isinstance(driver, FalkorDriver):
        # `_database` is the graph a group's driver is bound to (graphiti's `clone(database=...)`).
        graph = driver.client.select_graph(driver._database)
        try:
            answer = await graph.ro_query(query, _query_params(params))
        except ResponseError as exc:
            if _NO_GRAPH in str(exc):
                return []
            raise
        header = [column[1] for column in answer.header]
        return [dict(zip(header, row, strict=False)) for row in answer.result_set]
    result = await driver.execute_query(query, **params)
    if result is None:
        return []
    records = result[0]
    return [dict(record) for record in records]


async def recent_facts(driver: GraphDriver, gid: str, limit: int, now: datetime) -> list[dict[str, Any]]:
    """The newest facts of a group still current at `now` (what /memory shows without a query)."""
    return await rows(driver, _CURRENT_FACTS, gid=gid, now=now, limit=limit)


def export_group_empty() -> dict[str, Any]:
    """What `export_group` gives for a group with nothing stored."""
    return {"episodes": [], "facts": [], "entities": []}


async def export_group(driver: GraphDriver, gid: str) -> dict[str, Any]:
    """Episodes, facts (with their validity) and entities of one group, JSON-ready."""
    episodes = await rows(driver, _EPISODES, gid=gid)
    facts = await rows(driver, _FACTS, gid=gid)
    entities = await rows(driver, _ENTITIES, gid=gid)
    for item in (*episodes, *facts):
        for key in ("valid_at", "invalid_at", "expired_at"):
            if key in item:
                item[key] = _iso(item[key])
    return {"episodes": episodes, "facts": facts, "entities": entities}
