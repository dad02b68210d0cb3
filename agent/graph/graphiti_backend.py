"""`KnowledgeGraph` on graphiti-core: episodes in, temporal facts out, one graph partition per user group."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import anthropic
from graphiti_core import Graphiti
from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.driver.driver import GraphDriver, GraphProvider
from graphiti_core.edges import EntityEdge
from graphiti_core.errors import GraphitiError
from graphiti_core.llm_client import LLMClient
from graphiti_core.llm_client.errors import EmptyResponseError, RateLimitError, RefusalError
from graphiti_core.search.search import search as graph_search
from graphiti_core.search.search_config import (
    EdgeReranker,
    EdgeSearchConfig,
    EdgeSearchMethod,
    SearchConfig,
)
from graphiti_core.search.search_filters import ComparisonOperator, DateFilter, SearchFilters
from neo4j.exceptions import DriverError, Neo4jError
from pydantic import ValidationError
from redis.exceptions import RedisError

from agent.core.bounded import BoundedCache, KeyedLocks
from agent.core.clock import Clock, ensure_utc
from agent.core.errors import GraphError
from agent.graph.base import GROUPS, EdgeFact, GraphResults, Group, GroupLimits, ListedFact, Vector, group_id
from agent.graph.connect import GraphConnection
from agent.graph.embedder import GraphitiEmbedder
from agent.graph.episodes import Episode, episode_uuid, write_episode
from agent.graph.fast_search import FoundFact, ensure_vector_index, found_fact, search_group
from agent.graph.records import export_group, export_group_empty, recent_facts
from agent.graph.triplets import PERSONA_KEY
from agent.graph.vector_space import (
    REINDEX_HINT,
    Space,
    check_spaces,
    leaves_vectors_aside,
    settle_space,
    vectors_aside,
)
from agent.graph.view import end_standing_on, episode_name, row_ids_of, row_source, rows_behind
from agent.search.embeddings import Embedder

logger = logging.getLogger(__name__)

SearchRecipe = Literal["indexed", "graphiti"]

# What a failing graph database or model looks like from here; anything else is a bug and propagates.
BACKEND_ERRORS: tuple[type[BaseException], ...] = (
    GraphitiError,
    RedisError,
    Neo4jError,
    DriverError,
    OSError,
    TimeoutError,
    anthropic.APIError,
    RateLimitError,
    RefusalError,
    EmptyResponseError,
    ValidationError,
)
# Graphiti objects bound to a group's graph, kept for the most recently used groups (3 per user).
MAX_SCOPES = 300


class _KeepOrder(CrossEncoderClient):
    """Graphiti insists on a reranker; our searches rank by RRF and never call it."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        """Keep the incoming order."""
        return [(passage, 1.0 / (index + 1)) for index, passage in enumerate(passages)]


def current_filter(now: datetime) -> SearchFilters:
    """Facts not expired and not ended before `now`: a superseded fact is never presented as current."""
    return SearchFilters(
        expired_at=[[DateFilter(comparison_operator=ComparisonOperator.is_null)]],
        invalid_at=[
            [DateFilter(comparison_operator=ComparisonOperator.is_null)],
            [DateFilter(date=now, comparison_operator=ComparisonOperator.greater_than)],
        ],
    )


def _search_config(limit: int, *, vectors: bool = True) -> SearchConfig:
    methods = [EdgeSearchMethod.bm25, *([EdgeSearchMethod.cosine_similarity] if vectors else [])]
    return SearchConfig(
        edge_config=EdgeSearchConfig(
            search_methods=methods,
            reranker=EdgeReranker.rrf,
        ),
        limit=limit,
    )


class GraphitiGraph:
    """The knowledge graph: per user three graphiti groups (`u<id>_user`, `_relationship`, `_persona`)."""

    def __init__(
        self,
        connection: GraphConnection,
        *,
        llm_client: LLMClient,
        embedder: Embedder,
        clock: Clock,
        episode_timeout_seconds: float | None = None,
        max_scopes: int = MAX_SCOPES,
        search_recipe: SearchRecipe = "indexed",
        persona_name: str = PERSONA_KEY,
    ) -> None:
        self.connection = connection
        # What the graph calls the persona (its anchor entities' names; their ids do not change).
        self.persona_name = persona_name
        self.llm_client = llm_client
        self.embedder = GraphitiEmbedder(embedder)
        # The vector space this process embeds in; a group recorded with another is searched without it.
        self.space: Space = (embedder.name, embedder.dimensions)
        self.clock = clock
        self.episode_timeout_seconds = episode_timeout_seconds
        self._reranker = _KeepOrder()
        # `indexed` (FalkorDB only: one vector-index + BM25 query per group, agent/graph/fast_search.py)
        # or `graphiti` (its own edge search; always on Neo4j). The benchmark compares the two.
        self.search_recipe = search_recipe
        # Bounded: an evicted scope is built again on next use (a few index queries).
        self._scopes: BoundedCache[str, Graphiti] = BoundedCache(max_entries=max_scopes)
        self._scope_lock = asyncio.Lock()
        # graphiti wants one group's episodes added one at a time (entity resolution reads what the
        # previous episode wrote); this holds inside one process, job claiming across processes.
        # A group's lock exists only while a write holds or awaits it.
        self._write_locks: KeyedLocks[str] = KeyedLocks()

    @property
    def driver(self) -> GraphDriver:
        """The root driver (FalkorDB: its default graph; Neo4j: the one database)."""
        return self.connection.driver

    async def start(self) -> None:
        """Build the root indices once at start, check the database answers, and check which embedder
        wrote each group's vectors (logging the groups of another one)."""
        await self.driver.build_indices_and_constraints()
        await check_spaces(self.connection, self.space)

    async def graphiti_for(self, gid: str) -> Graphiti:
        """The Graphiti bound to one group's graph (cached; its indices built once per process).

        FalkorDB keeps each group_id in a graph of its own, created here if it does not exist yet (for
        a write); reads go through `_read_scope`, which never creates one. Binding a Graphiti to the
        group's graph avoids graphiti cloning (and re-indexing) a driver on every call. Neo4j keeps
        one database for all groups.
        """
        if (scope := self._scopes.get(gid)) is not None:
            return scope
        async with self._scope_lock:
            return await self._scope_locked(gid)

    async def _read_scope(self, gid: str) -> Graphiti | None:
        """The group's Graphiti when its graph exists; None, creating nothing, for a group never written
        or forgotten (here or by another process: the server is asked every time)."""
        if not await self.connection.has_graph(gid):
            return None
        if (scope := self._scopes.get(gid)) is not None:
            return scope
        async with self._scope_lock:
            # Asked again under the lock /forget drops graphs under: the graph may be gone since.
            if not await self.connection.has_graph(gid):
                return None
            return await self._scope_locked(gid)

    async def _scope_locked(self, gid: str) -> Graphiti:
        """Build (or find) the group's Graphiti; the caller holds `_scope_lock`."""
        if (scope := self._scopes.get(gid)) is not None:
            return scope
        driver = self.driver
        if driver.provider == GraphProvider.FALKORDB:
            driver = driver.clone(database=gid)
            # A FalkorDriver made inside a running loop schedules its index build as a task: wait for it.
            init = getattr(driver, "_init_task", None)
            if isinstance(init, asyncio.Task):
                await init
            else:
                await driver.build_indices_and_constraints()
        # A new group gets the current embedder's record here, before its first write.
        recorded = await settle_space(driver, gid, self.space)
        if recorded != self.space:
            logger.info(
                f"graph group embedded by another model: full text only until `{REINDEX_HINT}`",
                extra={"group": gid, "recorded": f"{recorded[0]} ({recorded[1]})", "embedder": self.space[0]},
            )
            driver = vectors_aside(driver)
        elif driver.provider == GraphProvider.FALKORDB:
            await ensure_vector_index(driver, self.space[1])
        scope = Graphiti(
            graph_driver=driver,
            llm_client=self.llm_client,
            embedder=self.embedder,
            cross_encoder=self._reranker,
        )
        self._scopes.put(gid, scope)
        return scope

    async def add_episode(
        self,
        user_id: int,
        group: Group,
        name: str,
        body: str,
        reference_time: datetime,
        source_id: str,
        *,
        facts: Sequence[str] | None = None,
    ) -> None:
        """Add an episode at its own time; the same `source_id` twice adds it once.

        With `facts` (one per line, already extracted) they are written as triplets of the episode
        (agent/graph/triplets.py: at most one model call each); without, graphiti extracts `body`.
        """
        gid = group_id(user_id, group)
        reference_time = ensure_utc(reference_time)
        episode_id = episode_uuid(gid, source_id)
        started = time.perf_counter()
        try:
            async with self._write_locks.hold(gid), asyncio.timeout(self.episode_timeout_seconds):
                scope = await self.graphiti_for(gid)
                await write_episode(
                    scope,
                    Episode(gid, group, name, body, reference_time, source_id, episode_id, facts),
                    clock=self.clock,
                    persona_name=self.persona_name,
                )
        except BACKEND_ERRORS as exc:
            raise GraphError(f"graph episode for {gid} failed: {exc}") from exc
        logger.info(
            "graph episode added",
            extra={"user_id": user_id, "group": group, "ms": round((time.perf_counter() - started) * 1000)},
        )

    async def add_facts(self, user_id: int, facts: Sequence[ListedFact], group: Group = "user") -> None:
        """Each row an episode of the group, its edges pointing back to it (agent/graph/view.py), a
        fact per line of its words; a row already written adds nothing."""
        for row in facts:
            lines = [line for line in row.text.splitlines() if line.strip()]
            if not lines:
                continue
            name, source = episode_name(group, row), row_source(group, row.id)
            await self.add_episode(user_id, group, name, row.text, row.at, source, facts=lines)

    async def end_facts(self, user_id: int, ids: Sequence[int], at: datetime, group: Group = "user") -> int:
        """The rows' episodes leave the group's edges; an edge standing on none ends at `at`
        (`invalid_at` and `expired_at`, as graphiti ends a contradicted fact)."""
        gid = group_id(user_id, group)
        try:
            scope = await self._read_scope(gid)
            if scope is None or not ids:
                return 0
            episodes = [episode_uuid(gid, row_source(group, i)) for i in ids]
            async with self._write_locks.hold(gid):
                return await end_standing_on(scope.driver, gid, episodes, ensure_utc(at))
        except BACKEND_ERRORS as exc:
            raise GraphError(f"ending facts in {gid} failed: {exc}") from exc

    async def search(
        self, user_id: int, query: str, *, limits: GroupLimits, now: datetime, vector: Vector | None = None
    ) -> GraphResults:
        """Facts relevant to `query` from the three groups in parallel; a blank query gives the newest.

        `vector`: the query embedded by this graph's embedder already (recall embeds it once).
        """
        now = ensure_utc(now)
        # One embedding of the query serves the three groups (graphiti would embed it once per group).
        try:
            if not query.strip():
                embedded = None
            elif vector is not None:
                embedded = [float(value) for value in vector]
            else:
                embedded = await self.embedder.create_query(query)
        except BACKEND_ERRORS as exc:
            raise GraphError(f"embedding the graph query failed: {exc}") from exc
        found = await asyncio.gather(
            *(self._search_group(user_id, group, query, limits.of(group), now, embedded) for group in GROUPS)
        )
        return GraphResults(**dict(zip(GROUPS, found, strict=True)))

    async def _search_group(
        self, user_id: int, group: Group, query: str, limit: int, now: datetime, vector: list[float] | None
    ) -> list[EdgeFact]:
        if limit <= 0:
            return []
        gid = group_id(user_id, group)
        try:
            scope = await self._read_scope(gid)
            if scope is None:  # never written, or forgotten: nothing to find, and nothing to create
                return []
            found = await self._found(scope, gid, query, limit, now, vector)
            ids = await row_ids_of(scope.driver, (e for f in found for e in f.episodes))
        except BACKEND_ERRORS as exc:
            raise GraphError(f"graph search in {gid} failed: {exc}") from exc
        return [
            EdgeFact(group, f.fact, f.valid_at, f.invalid_at, f.uuid, rows_behind(f.episodes, ids))
            for f in found
        ]

    async def _found(
        self, scope: Graphiti, gid: str, query: str, limit: int, now: datetime, vector: list[float] | None
    ) -> list[FoundFact]:
        """The group's current facts: the newest for a blank query, else our indexed query on FalkorDB
        (graphiti's search while the index builds, and on Neo4j)."""
        if not query.strip():
            return [found_fact(r) for r in await recent_facts(scope.driver, gid, limit, now)]
        if leaves_vectors_aside(scope.driver):  # the group holds another model's vectors
            vector = None
        if self.search_recipe == "indexed" and scope.driver.provider == GraphProvider.FALKORDB:
            found = await search_group(scope.driver, query, vector, limit=limit, now=now)
            if found is not None:
                return found
        results = await graph_search(
            scope.clients,
            query,
            [gid],
            _search_config(limit, vectors=vector is not None),
            current_filter(now),
            query_vector=vector,
            driver=scope.driver,
        )
        return [_fact(edge) for edge in results.edges if _is_current(edge, now)][:limit]

    async def forget_user(self, user_id: int) -> None:
        """Delete every node and edge of the user's three groups (on FalkorDB: their graphs)."""
        for group in GROUPS:
            gid = group_id(user_id, group)
            # Under the scope lock, so a read that found the graph cannot build its scope (and indices,
            # which would create the graph again) after the graph is gone.
            async with self._scope_lock:
                try:
                    if self.driver.provider == GraphProvider.FALKORDB:
                        # The group's graph holds the group alone: deleting it deletes every node and edge.
                        await self.connection.drop_graph(gid)
                    else:
                        await self.driver.execute_query(
                            "MATCH (n) WHERE n.group_id = $gid DETACH DELETE n", gid=gid
                        )
                except BACKEND_ERRORS as exc:
                    raise GraphError(f"forgetting {gid} failed: {exc}") from exc
                finally:
                    self._scopes.pop(gid)
        logger.info("graph forgotten", extra={"user_id": user_id})

    async def export_user(self, user_id: int) -> dict[str, Any]:
        """Every episode, fact and entity of the user's three groups, JSON-ready."""
        groups: dict[str, Any] = {}
        for group in GROUPS:
            gid = group_id(user_id, group)
            try:
                scope = await self._read_scope(gid)
                groups[group] = await export_group(scope.driver, gid) if scope else export_group_empty()
            except BACKEND_ERRORS as exc:
                raise GraphError(f"exporting {gid} failed: {exc}") from exc
        return {"backend": self.connection.backend, "groups": groups}

    def cache_sizes(self) -> dict[str, int]:
        """Group scopes kept, and groups whose write lock is held or awaited (both bounded)."""
        return {"scopes": len(self._scopes), "write_locks": len(self._write_locks)}

    async def close(self) -> None:
        """Close the connection and stop the embedded database."""
        self._scopes.clear()
        await self.connection.close()


def _is_current(edge: EntityEdge, now: datetime) -> bool:
    # Belt and braces over the query filter: stored times come back as strings on FalkorDB.
    if edge.expired_at is not None:
        return False
    return edge.invalid_at is None or ensure_utc(edge.invalid_at) > now


def _fact(edge: EntityEdge) -> FoundFact:
    return FoundFact(
        uuid=edge.uuid,
        fact=edge.fact,
        valid_at=ensure_utc(edge.valid_at) if edge.valid_at else None,
        invalid_at=ensure_utc(edge.invalid_at) if edge.invalid_at else None,
        episodes=tuple(edge.episodes),
    )
