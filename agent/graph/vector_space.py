"""Which embedder wrote a group's vectors, and a group searched without them when it was another.

Each group keeps one `(:VectorSpace {group_id, embedder, dimensions})` node beside its entities and
facts: on FalkorDB in the group's own graph, on Neo4j in the one database, found by `group_id`. A
node, and not a property on every vector, because it is one read at a group's opening, one write
when the group is re-embedded, and it travels with the group: /forget removes it with the group
(the graph dropped, or every node of the `group_id` deleted) and a copied database keeps it. Per
group, and not one per database, because `reindex --user` re-embeds one user's groups only.
graphiti reads nodes by their labels (`Entity`, `Episodic`, `Community`), so it never sees this one.

A group whose record names another embedder or width is opened with `VectorsAside` as its driver's
search interface: every vector comparison graphiti would make (its edge and entity similarity
searches, in its searches and in the duplicate checks of a write) finds nothing, and the full-text
side answers alone. Comparing two models' vectors ranks nonsense, and two widths make FalkorDB fail
the whole query ("Vector dimension mismatch"), writes included.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from collections import Counter
from typing import Any

from graphiti_core.driver.driver import GraphDriver
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.driver.search_interface.search_interface import SearchInterface
from graphiti_core.search import search_utils
from pydantic import ConfigDict

from agent.graph.connect import GraphConnection
from agent.graph.records import rows

logger = logging.getLogger(__name__)

LABEL = "VectorSpace"
REINDEX_HINT = "python -m bot reindex"
# The graphs of user groups (`group_id`): FalkorDB may hold other graphs (the root one, others' data).
GROUP_GRAPH = re.compile(r"u\d+_(user|relationship|persona)")
# Records read at once while scanning the groups at start (the connection pool bounds them anyway).
SCAN_CONCURRENCY = 8

_READ = f"""
MATCH (s:{LABEL}) WHERE s.group_id = $gid
RETURN s.embedder AS embedder, s.dimensions AS dimensions
LIMIT 1
"""
_WRITE = f"MERGE (s:{LABEL} {{group_id: $gid}}) SET s.embedder = $embedder, s.dimensions = $dimensions"
_NEO4J_ALL = f"MATCH (s:{LABEL}) RETURN s.group_id AS gid, s.embedder AS embedder, s.dimensions AS dimensions"
_NEO4J_UNRECORDED = f"""
MATCH (n) WHERE (n:Entity OR n:Episodic) AND n.group_id IS NOT NULL
WITH DISTINCT n.group_id AS gid
WHERE NOT EXISTS {{ MATCH (s:{LABEL}) WHERE s.group_id = gid }}
RETURN gid
"""

Space = tuple[str, int]
"""An embedder's name and its width: what makes two vectors comparable."""


async def read_space(driver: GraphDriver, gid: str) -> Space | None:
    """The embedder and width recorded for the group; None when nothing is recorded."""
    found = await rows(driver, _READ, gid=gid)
    if not found or found[0]["embedder"] is None:
        return None
    return str(found[0]["embedder"]), int(found[0]["dimensions"])


async def write_space(driver: GraphDriver, gid: str, space: Space) -> None:
    """Record that the group's vectors are now all of `space`."""
    await driver.execute_query(_WRITE, gid=gid, embedder=space[0], dimensions=space[1])


async def settle_space(driver: GraphDriver, gid: str, current: Space) -> Space:
    """The group's recorded space; a group with none (new, or older than the record) gets `current`.

    A group written before groups recorded their embedder is taken as written by the current one:
    nothing else could be known about it.
    """
    recorded = await read_space(driver, gid)
    if recorded is None:
        await write_space(driver, gid, current)
        return current
    return recorded


class VectorsAside(SearchInterface):
    """graphiti's search of a group whose vectors are another model's: full text only.

    The similarity searches find nothing; the full-text ones run graphiti's own queries on `plain`,
    the same group's driver without this interface. What graphiti may skip (its breadth-first and
    reranking hooks) raises `NotImplementedError`, so it runs its own code for them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    plain: Any  # GraphDriver (graphiti types SearchInterface's arguments as Any to avoid cycles)

    async def edge_fulltext_search(
        self,
        driver: Any,
        query: str,
        search_filter: Any,
        group_ids: list[str] | None = None,
        limit: int = 100,
    ) -> list[Any]:
        """graphiti's BM25 over facts."""
        return await search_utils.edge_fulltext_search(self.plain, query, search_filter, group_ids, limit)

    async def node_fulltext_search(
        self,
        driver: Any,
        query: str,
        search_filter: Any,
        group_ids: list[str] | None = None,
        limit: int = 100,
    ) -> list[Any]:
        """graphiti's BM25 over entity names and summaries."""
        return await search_utils.node_fulltext_search(self.plain, query, search_filter, group_ids, limit)

    async def episode_fulltext_search(
        self,
        driver: Any,
        query: str,
        search_filter: Any,
        group_ids: list[str] | None = None,
        limit: int = 100,
    ) -> list[Any]:
        """graphiti's BM25 over episodes."""
        return await search_utils.episode_fulltext_search(self.plain, query, search_filter, group_ids, limit)

    async def edge_similarity_search(self, *args: Any, **kwargs: Any) -> list[Any]:
        """No fact is compared with a vector of another model."""
        return []

    async def node_similarity_search(self, *args: Any, **kwargs: Any) -> list[Any]:
        """No entity is compared with a vector of another model."""
        return []

    async def community_similarity_search(self, *args: Any, **kwargs: Any) -> list[Any]:
        """No community is compared with a vector of another model."""
        return []


def group_driver(driver: GraphDriver, gid: str) -> GraphDriver:
    """The root driver bound to one group's graph on FalkorDB (the driver itself on Neo4j).

    A shallow copy sharing the connection: graphiti's `clone` would also schedule a build of every
    index of the graph, which a scan of all groups or a re-embedding does not need.
    """
    if not isinstance(driver, FalkorDriver):
        return driver
    bound = copy.copy(driver)
    bound._database = gid
    bound._init_task = None
    return bound


def vectors_aside(driver: GraphDriver) -> GraphDriver:
    """A copy of the group's driver (same connection) whose searches leave vectors aside."""
    blind = copy.copy(driver)
    blind.search_interface = VectorsAside(plain=driver)
    return blind


def leaves_vectors_aside(driver: GraphDriver) -> bool:
    """Whether the group's vectors are another model's (its driver searches by full text only)."""
    return isinstance(driver.search_interface, VectorsAside)


async def check_spaces(connection: GraphConnection, current: Space) -> Counter[Space]:
    """At start: record the current embedder for groups without a record, count groups of other ones.

    Recording every group now, rather than when it is next opened, keeps a group untouched for
    months from being taken for the current model's after a later change of EMBEDDER. Returns how
    many groups each other space holds, and logs one warning naming the reindex when there are any.
    """
    others: Counter[Space] = Counter()
    driver = connection.driver
    if connection.backend == "neo4j":
        for row in await rows(driver, _NEO4J_UNRECORDED):
            await write_space(driver, str(row["gid"]), current)
        for row in await rows(driver, _NEO4J_ALL):
            space = (str(row["embedder"]), int(row["dimensions"]))
            if space != current:
                others[space] += 1
    else:
        names = [name for name in await connection.graph_names() if GROUP_GRAPH.fullmatch(name)]
        limit = asyncio.Semaphore(SCAN_CONCURRENCY)

        async def one(gid: str) -> Space:
            async with limit:
                return await settle_space(group_driver(driver, gid), gid, current)

        for space in await asyncio.gather(*(one(gid) for gid in names)):
            if space != current:
                others[space] += 1
    if others:
        logger.warning(
            f"knowledge graph: {others.total()} group(s) hold vectors of another embedder; their vector "
            f"search is left aside (full text only) until `{REINDEX_HINT}` re-embeds them",
            extra={
                "embedder": current[0],
                "dimensions": current[1],
                "others": {f"{name} ({width})": count for (name, width), count in others.items()},
            },
        )
    return others
