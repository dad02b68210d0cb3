"""Keeps the embedding index current: chunks of new messages, changed day summaries and facts, per user.

Full text needs no indexer (triggers / generated columns keep it in the writer's transaction).
Embeddings are derived data: indexing runs after the turn commits and again, as a catch-up, before
every search, so a failure (model missing, crash) is logged and repaired later, never fatal.

Every chunk records its vector space (the embedder's name and width). After EMBEDDER changes, the
catch-up embeds only what is newer than the newest chunk of any space: older messages keep their
old vectors, which search leaves aside (it ranks those messages by full text), until
`python -m bot reindex` embeds everything again with the current model.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
from sqlalchemy import ColumnElement, and_, delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.settings import Settings
from agent.history.tokens import TokenCounter
from agent.search.chunks import Chunk, ChunkMessage, build_chunks, split_text
from agent.search.embeddings import Embedder
from agent.search.units import MessageUnits
from agent.search.vectors import VectorCache
from db.models import DaySegment, SearchChunk, TranscriptMessage, User

logger = logging.getLogger(__name__)

Vector = npt.NDArray[np.float32]


@dataclass
class IndexStats:
    """What one indexing pass did."""

    messages: int = 0
    chunks: int = 0
    sections: int = 0
    summaries: int = 0
    facts: int = 0


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


class Indexer:
    """Builds and refreshes `search_chunks` rows for one embedder."""

    def __init__(
        self,
        *,
        settings: Settings,
        embedder: Embedder,
        counter: TokenCounter,
        cache: VectorCache,
        units: MessageUnits | None = None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.counter = counter
        self.cache = cache
        self.units = units

    def _in_space(self) -> ColumnElement[bool]:
        """Chunks of this embedder's vector space (its name and width)."""
        return and_(
            SearchChunk.embedder == self.embedder.name, SearchChunk.dimensions == self.embedder.dimensions
        )

    async def index_user(self, session: AsyncSession, user_id: int, *, now: datetime) -> IndexStats:
        """Chunk and embed the user's messages not yet indexed and their changed day summaries."""
        stats = IndexStats()
        await self._index_messages(session, user_id, now, stats)
        for segment in await self._stale_summaries(session, user_id):
            if await self.index_day_summary(session, segment, now=now):
                stats.summaries += 1
        if self.units is not None:
            stats.facts = await self.units.index(session, user_id, embedder=self.embedder, now=now)
        if stats.chunks or stats.summaries or stats.facts:
            self.cache.invalidate(user_id)
        return stats

    async def _resume_point(
        self, session: AsyncSession, user_id: int, reuse: dict[tuple[int, ...], Vector]
    ) -> tuple[int, list[int]]:
        """(last message id already final, overlap ids to repeat); drops an incomplete last chunk.

        The dropped chunk's section vectors go into `reuse`: only its growing last section is new.
        """
        last = (
            await session.execute(
                select(SearchChunk)
                .where(SearchChunk.user_id == user_id, SearchChunk.kind == "messages", self._in_space())
                .order_by(SearchChunk.last_message_id.desc(), SearchChunk.id.desc())
                .limit(1)
            )
        ).scalar_one_or_none()
        if last is None:
            # Nothing in this space: start after what another model indexed (`bot reindex` redoes it).
            other = await session.scalar(
                select(func.max(SearchChunk.last_message_id)).where(
                    SearchChunk.user_id == user_id, SearchChunk.kind == "messages"
                )
            )
            return int(other or 0), []
        newest = await session.scalar(
            select(func.max(TranscriptMessage.id)).where(
                TranscriptMessage.user_id == user_id, TranscriptMessage.role != "system"
            )
        )
        ids = [int(i) for i in last.message_ids]
        if newest is None or newest <= ids[-1]:
            return ids[-1], []  # nothing new: keep the last chunk as it is
        if last.token_count < self.settings.search_chunk_tokens:
            # The day's last chunk was still filling up: rebuild it with the new messages.
            old = np.frombuffer(last.vectors, dtype=np.float32).reshape(-1, last.dimensions)
            for row, (start, end) in enumerate(last.sections):
                reuse[tuple(ids[start:end])] = old[row]
            await session.delete(last)
            await session.flush()
            return ids[0] - 1, []
        overlap = self.settings.search_chunk_overlap_messages
        return ids[-1], ids[-overlap:] if overlap > 0 else []

    async def _index_messages(
        self, session: AsyncSession, user_id: int, now: datetime, stats: IndexStats
    ) -> None:
        reuse: dict[tuple[int, ...], Vector] = {}
        after, overlap_ids = await self._resume_point(session, user_id, reuse)
        columns = (
            TranscriptMessage.id,
            TranscriptMessage.day_segment_id,
            TranscriptMessage.content,
            TranscriptMessage.sent_at,
            TranscriptMessage.role,
            TranscriptMessage.speaker_name,
        )
        rows = (
            await session.execute(
                select(*columns)
                .where(
                    TranscriptMessage.user_id == user_id,
                    TranscriptMessage.id > after,
                    TranscriptMessage.role != "system",
                )
                .order_by(TranscriptMessage.id)
            )
        ).all()
        if not rows:
            return
        if overlap_ids:
            tail = (
                await session.execute(
                    select(*columns)
                    .where(TranscriptMessage.id.in_(overlap_ids), TranscriptMessage.user_id == user_id)
                    .order_by(TranscriptMessage.id)
                )
            ).all()
            # Overlap only inside one day: chunks never cross a day boundary.
            rows = [r for r in tail if r.day_segment_id == rows[0].day_segment_id] + list(rows)
        user_name = await session.scalar(select(User.name).where(User.id == user_id))
        speakers = {"user": (user_name or "").strip() or "User", "assistant": self.settings.persona_name}
        messages = [
            ChunkMessage(
                r.id,
                r.day_segment_id,
                r.content,
                r.sent_at,
                max(1, self.counter.count(r.content)),
                r.speaker_name or speakers.get(r.role, ""),
            )
            for r in rows
        ]
        chunks = build_chunks(
            messages,
            target_tokens=self.settings.search_chunk_tokens,
            max_tokens=self.settings.search_chunk_max_tokens,
            overlap=self.settings.search_chunk_overlap_messages,
            section_tokens=self.settings.search_section_tokens,
            section_overlap=self.settings.search_section_overlap_messages,
        )
        await self._store_chunks(session, user_id, chunks, now, reuse)
        stats.messages += len(rows)
        stats.chunks += len(chunks)
        stats.sections += sum(len(c.sections) for c in chunks)

    async def _store_chunks(
        self,
        session: AsyncSession,
        user_id: int,
        chunks: Sequence[Chunk],
        now: datetime,
        reuse: dict[tuple[int, ...], Vector],
    ) -> None:
        keys = [tuple(c.message_ids[a:b]) for c in chunks for a, b in c.sections]
        texts = [t for c in chunks for t in c.section_texts]
        missing = [i for i, key in enumerate(keys) if key not in reuse]
        fresh = await self.embedder.embed([texts[i] for i in missing]) if missing else None
        vectors = np.zeros((len(keys), self.embedder.dimensions), dtype=np.float32)
        for i, key in enumerate(keys):
            if key in reuse:
                vectors[i] = reuse[key]
        if fresh is not None:
            vectors[missing] = fresh
        row = 0
        for chunk in chunks:
            block = np.ascontiguousarray(vectors[row : row + len(chunk.sections)], dtype=np.float32)
            row += len(chunk.sections)
            session.add(
                SearchChunk(
                    user_id=user_id,
                    day_segment_id=chunk.day_segment_id,
                    kind="messages",
                    message_ids=chunk.message_ids,
                    sections=[list(s) for s in chunk.sections],
                    first_message_id=chunk.message_ids[0],
                    last_message_id=chunk.message_ids[-1],
                    token_count=chunk.token_count,
                    digest=_digest(*chunk.section_texts),
                    embedder=self.embedder.name,
                    dimensions=self.embedder.dimensions,
                    vectors=block.tobytes(),
                    last_sent_at=chunk.last_sent_at,
                    created_at=now,
                )
            )
        await session.flush()

    async def _stale_summaries(self, session: AsyncSession, user_id: int) -> list[DaySegment]:
        """Segments whose summary has no embedding of its current version (in any space: one of an
        older model waits for `bot reindex`, as messages do)."""
        current = (
            select(SearchChunk.id)
            .where(
                SearchChunk.day_segment_id == DaySegment.id,
                SearchChunk.kind == "summary",
                or_(
                    DaySegment.summary_updated_at.is_(None),
                    SearchChunk.last_sent_at == DaySegment.summary_updated_at,
                ),
            )
            .exists()
        )
        stmt = select(DaySegment).where(
            DaySegment.user_id == user_id, DaySegment.summary.is_not(None), ~current
        )
        return list((await session.execute(stmt)).scalars())

    async def index_day_summary(self, session: AsyncSession, segment: DaySegment, *, now: datetime) -> bool:
        """Embed a day's summary (replacing an older one); False when there is none or it is current."""
        await session.execute(
            delete(SearchChunk).where(
                SearchChunk.day_segment_id == segment.id,
                SearchChunk.kind == "summary",
                SearchChunk.digest != _digest(segment.summary or ""),
            )
        )
        if not segment.summary or not segment.summary.strip():
            return False
        version_at = segment.summary_updated_at or segment.last_message_at
        existing = await session.scalar(
            select(SearchChunk).where(
                SearchChunk.day_segment_id == segment.id, SearchChunk.kind == "summary", self._in_space()
            )
        )
        if existing is not None:
            existing.last_sent_at = version_at  # same text, newer version stamp: nothing to embed
            return False
        parts = split_text(segment.summary, self.settings.search_section_tokens, self.counter.count)
        vectors = await self.embedder.embed(parts)
        session.add(
            SearchChunk(
                user_id=segment.user_id,
                day_segment_id=segment.id,
                kind="summary",
                message_ids=[],
                sections=[[0, 0] for _ in parts],
                first_message_id=segment.first_message_id,
                last_message_id=segment.last_message_id,
                token_count=sum(self.counter.count(p) for p in parts),
                digest=_digest(segment.summary),
                embedder=self.embedder.name,
                dimensions=self.embedder.dimensions,
                vectors=np.ascontiguousarray(vectors, dtype=np.float32).tobytes(),
                last_sent_at=version_at,
                created_at=now,
            )
        )
        await session.flush()
        self.cache.invalidate(segment.user_id)
        return True

    async def clear_user(self, session: AsyncSession, user_id: int) -> int:
        """Delete every chunk of a user (before a rebuild or when the user is forgotten)."""
        result = await session.execute(delete(SearchChunk).where(SearchChunk.user_id == user_id))
        self.cache.invalidate(user_id)
        return int(getattr(result, "rowcount", 0) or 0)
