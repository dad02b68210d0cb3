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
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt
from sqlalchemy import ColumnElement, and_, delete, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.settings import Settings
from agent.core.tokens import TokenCounter
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
    # The pass stopped at its message limit: more remains for the next one.
    more: bool = False

    def add(self, other: IndexStats) -> None:
        """Count another pass's messages, chunks, sections, summaries and facts in."""
        for name in ("messages", "chunks", "sections", "summaries", "facts"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class _NewChunks:
    """A pass's new message chunks and their section vectors, stacked in order; `drop` is the day's
    unfinished last chunk they replace."""

    chunks: list[Chunk]
    vectors: npt.NDArray[np.float32]
    drop: SearchChunk | None


@dataclass
class _Summary:
    """A stale day summary, ready to store: its current chunk (a newer stamp only), or its parts
    embedded (None: no summary text any more)."""

    segment: DaySegment
    digest: str
    current: SearchChunk | None
    parts: list[str]
    vectors: npt.NDArray[np.float32] | None


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

    async def index_user(
        self, session: AsyncSession, user_id: int, *, now: datetime, limit: int | None = None
    ) -> IndexStats:
        """Chunk and embed the user's messages not yet indexed and their changed day summaries.

        `limit`: at most that many new messages this pass (`stats.more` then says whether some are
        left; summaries and facts follow in the pass that finishes the messages). A day's last chunk
        is rebuilt by the next pass, as when new messages arrive.

        Everything is read and embedded before anything is written: on SQLite the first write takes
        the database's one write lock until the commit, and every turn's writes would wait for the
        model meanwhile.
        """
        stats = IndexStats()
        chunks = await self._new_chunks(session, user_id, stats, limit)
        summaries: list[_Summary] = []
        if not stats.more:
            for segment in await self._stale_summaries(session, user_id):
                summaries.append(await self._embed_summary(session, segment))
            # The facts' units embed before they write, and before anything else of the pass is written.
            if self.units is not None:
                stats.facts = await self.units.index(session, user_id, embedder=self.embedder, now=now)
        if chunks is not None:
            await self._store_chunks(session, user_id, chunks, now)
        for summary in summaries:
            if await self._store_summary(session, summary, now):
                stats.summaries += 1
        if stats.chunks or stats.summaries or stats.facts:
            self.cache.invalidate(user_id)
        return stats

    async def _resume_point(
        self, session: AsyncSession, user_id: int, reuse: dict[tuple[int, ...], Vector]
    ) -> tuple[int, list[int], SearchChunk | None]:
        """(last message id already final, overlap ids to repeat, an incomplete last chunk to drop).

        The chunk to drop is rebuilt with the new messages; its section vectors go into `reuse`: only
        its growing last section is new.
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
            return int(other or 0), [], None
        newest = await session.scalar(
            select(func.max(TranscriptMessage.id)).where(
                TranscriptMessage.user_id == user_id, TranscriptMessage.role != "system"
            )
        )
        ids = [int(i) for i in last.message_ids]
        if newest is None or newest <= ids[-1]:
            return ids[-1], [], None  # nothing new: keep the last chunk as it is
        if last.token_count < self.settings.search_chunk_tokens:
            # The day's last chunk was still filling up: rebuild it with the new messages.
            old = np.frombuffer(last.vectors, dtype=np.float32).reshape(-1, last.dimensions)
            for row, (start, end) in enumerate(last.sections):
                reuse[tuple(ids[start:end])] = old[row]
            return ids[0] - 1, [], last
        overlap = self.settings.search_chunk_overlap_messages
        return ids[-1], ids[-overlap:] if overlap > 0 else [], None

    async def _new_chunks(
        self, session: AsyncSession, user_id: int, stats: IndexStats, limit: int | None
    ) -> _NewChunks | None:
        """The chunks of the messages not indexed yet, embedded (nothing is written here)."""
        reuse: dict[tuple[int, ...], Vector] = {}
        after, overlap_ids, drop = await self._resume_point(session, user_id, reuse)
        again = len(drop.message_ids) if drop is not None else 0
        columns = (
            TranscriptMessage.id,
            TranscriptMessage.day_segment_id,
            TranscriptMessage.content,
            TranscriptMessage.sent_at,
            TranscriptMessage.role,
            TranscriptMessage.speaker_name,
        )
        new = (
            select(*columns)
            .where(
                TranscriptMessage.user_id == user_id,
                TranscriptMessage.id > after,
                TranscriptMessage.role != "system",
            )
            .order_by(TranscriptMessage.id)
        )
        # The limit counts new messages: a dropped chunk's own messages are read again on top.
        wanted = None if limit is None else again + limit
        rows = (await session.execute(new if wanted is None else new.limit(wanted + 1))).all()
        if wanted is not None and len(rows) > wanted:
            rows, stats.more = rows[:wanted], True
        if not rows:
            return None
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
        stats.messages += len(rows)
        stats.chunks += len(chunks)
        stats.sections += sum(len(c.sections) for c in chunks)
        return _NewChunks(chunks, vectors, drop)

    async def _store_chunks(
        self, session: AsyncSession, user_id: int, new: _NewChunks, now: datetime
    ) -> None:
        if new.drop is not None:
            await session.delete(new.drop)
            await session.flush()
        vectors, row = new.vectors, 0
        for chunk in new.chunks:
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

    async def _embed_summary(self, session: AsyncSession, segment: DaySegment) -> _Summary:
        """What indexing the day's summary takes: its chunk in this space if current, else its parts
        embedded (nothing is written here)."""
        digest = _digest(segment.summary or "")
        current = await session.scalar(
            select(SearchChunk).where(
                SearchChunk.day_segment_id == segment.id,
                SearchChunk.kind == "summary",
                SearchChunk.digest == digest,
                self._in_space(),
            )
        )
        if current is not None or not segment.summary or not segment.summary.strip():
            return _Summary(segment, digest, current, [], None)
        parts = split_text(segment.summary, self.settings.search_section_tokens, self.counter.count)
        return _Summary(segment, digest, None, parts, await self.embedder.embed(parts))

    async def _store_summary(self, session: AsyncSession, summary: _Summary, now: datetime) -> bool:
        segment = summary.segment
        await session.execute(
            delete(SearchChunk).where(
                SearchChunk.day_segment_id == segment.id,
                SearchChunk.kind == "summary",
                SearchChunk.digest != summary.digest,
            )
        )
        version_at = segment.summary_updated_at or segment.last_message_at
        if summary.current is not None:
            summary.current.last_sent_at = version_at  # same text, newer version stamp: nothing to embed
            return False
        if summary.vectors is None:
            return False
        session.add(
            SearchChunk(
                user_id=segment.user_id,
                day_segment_id=segment.id,
                kind="summary",
                message_ids=[],
                sections=[[0, 0] for _ in summary.parts],
                first_message_id=segment.first_message_id,
                last_message_id=segment.last_message_id,
                token_count=sum(self.counter.count(p) for p in summary.parts),
                digest=summary.digest,
                embedder=self.embedder.name,
                dimensions=self.embedder.dimensions,
                vectors=np.ascontiguousarray(summary.vectors, dtype=np.float32).tobytes(),
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
