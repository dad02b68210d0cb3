"""`python -m bot reindex [--user KEY]`: rebuild the full-text and embedding indexes, with a progress bar."""

from __future__ import annotations

import sys

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from tqdm import tqdm  # type: ignore[import-untyped]

from agent.core.clock import Clock
from agent.core.settings import Settings
from agent.search.embedders import open_embedder
from agent.search.embeddings import Embedder
from agent.search.indexer import IndexStats
from agent.search.model_embedder import ModelEmbedder
from agent.search.recall import build_recall
from db.engine import create_engine, session_factory
from db.migrate import upgrade_to_head_async
from db.models import SearchChunk, TranscriptMessage, User
from db.repositories import UserRepository


async def run_reindex(settings: Settings, *, user_key: str | None = None) -> int:
    """Rebuild indexes for every user, or for one; returns the exit status."""
    await upgrade_to_head_async(settings.database_url)
    engine = create_engine(settings.database_url)
    sessions = session_factory(engine)
    try:
        embedder = await open_embedder(settings)
        recall = build_recall(settings, sessions, dialect=engine.dialect.name, embedder=embedder)
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
        mode = f"embeddings: {embedder.name}" if embedder else "embeddings off (EMBEDDER=none)"
        if embedder is not None and others:
            mode += f", replacing {others} chunks of other models"
        if isinstance(embedder, ModelEmbedder) and embedder.input_tokens:
            mode += f", {embedder.input_tokens} tokens sent"
        print(
            f"reindexed {users} user(s): {total.messages} messages in {total.chunks} chunks "
            f"({total.sections} sections), {total.summaries} day summaries; full text rebuilt; {mode}"
        )
        return 0
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
