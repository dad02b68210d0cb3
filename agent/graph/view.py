"""Each group as a view of its rows: an episode per row, edges pointing back to it.

Each row a group follows (db/repositories/graph_work.py: a fact of the list, a final day's key
moments, a thought) is written as an episode of its own, whose stable id derives from the row's id
(`fact:<id>`, `moments:<day id>`, `thought:<id>`) and whose name also carries the person's messages
the row stands on (`fact:12 messages:40,41`). The row's edge lists that episode in `episodes`,
graphiti's own link from an edge to what it was learned from, which graphiti keeps when it folds a
repeated fact into an existing edge (the episode is appended), so an edge reaches every row that
says it. An edge's
attributes would not: graphiti drops the new edge's attributes when it finds a duplicate.

Reads map an edge back to its rows through those episodes; taking a row back (or rewording it)
removes its episode from the edges, ends the edges that stand on nothing else and deletes the
episode, so the graph follows its rows and can be rebuilt from them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from graphiti_core.driver.driver import GraphDriver

from agent.graph.base import Group, ListedFact
from agent.graph.records import rows

_ROW = re.compile(r"^[a-z]+:(\d+)\b")
# What an episode's name calls its group's rows.
SOURCES: dict[Group, str] = {"user": "fact", "relationship": "moments", "persona": "thought"}
_EPISODE_NAMES = """
MATCH (e:Episodic) WHERE e.uuid IN $uuids
RETURN e.uuid AS uuid, e.name AS name
"""
_STANDING_ON = """
MATCH ()-[r:RELATES_TO]->()
WHERE r.group_id = $gid AND r.expired_at IS NULL AND any(u IN r.episodes WHERE u IN $uuids)
RETURN r.uuid AS uuid, r.episodes AS episodes
"""
_KEEP = "MATCH ()-[r:RELATES_TO]->() WHERE r.uuid = $uuid SET r.episodes = $episodes"
_DROP = "MATCH (e:Episodic) WHERE e.uuid IN $uuids AND e.group_id = $gid DETACH DELETE e"
_END = (
    "MATCH ()-[r:RELATES_TO]->() WHERE r.uuid = $uuid "
    "SET r.episodes = $episodes, r.invalid_at = $at, r.expired_at = $at"
)


def row_source(group: Group, row_id: int) -> str:
    """The source id of a row's episode (its stable id derives from it)."""
    return f"{SOURCES[group]}:{row_id}"


def episode_name(group: Group, row: ListedFact) -> str:
    """The episode's name: the row and the messages it stands on."""
    return f"{row_source(group, row.id)} messages:{','.join(str(m) for m in row.message_ids)}"


async def row_ids_of(driver: GraphDriver, episodes: Iterable[str]) -> dict[str, int]:
    """The row id behind each of these episodes of one group (episodes of no row are left out)."""
    uuids = sorted(set(episodes))
    if not uuids:
        return {}
    found: dict[str, int] = {}
    for row in await rows(driver, _EPISODE_NAMES, uuids=uuids):
        if (match := _ROW.match(str(row["name"] or ""))) is not None:
            found[str(row["uuid"])] = int(match.group(1))
    return found


def rows_behind(episodes: Sequence[str], ids: dict[str, int]) -> tuple[int, ...]:
    """An edge's rows, in the order its episodes came."""
    return tuple(dict.fromkeys(ids[e] for e in episodes if e in ids))


async def end_standing_on(driver: GraphDriver, gid: str, episodes: Sequence[str], at: datetime) -> int:
    """Take these episodes out of the group's current edges (an edge left standing on none ends at
    `at`) and delete them, so a row held again or reworded is written anew. How many edges ended."""
    gone = set(episodes)
    ended = 0
    for row in await rows(driver, _STANDING_ON, gid=gid, uuids=sorted(gone)):
        kept = [e for e in _as_list(row["episodes"]) if e not in gone]
        if kept:
            await driver.execute_query(_KEEP, uuid=row["uuid"], episodes=kept)
        else:
            await driver.execute_query(_END, uuid=row["uuid"], episodes=kept, at=at)
            ended += 1
    await driver.execute_query(_DROP, uuids=sorted(gone), gid=gid)
    return ended


def _as_list(value: Any) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list | tuple) else []
