"""Per-user vector matrices in memory, brute-force cosine with numpy (no pgvector / sqlite-vec here).

A user's section vectors are read from `search_chunks` once and stacked into one float32 matrix;
a search is one matrix-vector product. The cache entry is keyed by the user's chunk count and
newest chunk id, so a chunk written by this or another process is seen at the next search.
The cache is bounded by users and by bytes; a user's load lock lives only while it is in use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.bounded import BoundedCache, KeyedLocks
from db.models import DaySegment, SearchChunk

KIND_MESSAGES = 0
KIND_SUMMARY = 1


@dataclass
class UserVectors:
    """Every embedded section of one user, row-aligned arrays plus message -> rows lookup."""

    version: tuple[int, int]
    matrix: npt.NDArray[np.float32]
    kinds: npt.NDArray[np.int8]
    day_segment_ids: npt.NDArray[np.int64]
    days: npt.NDArray[np.int64]  # date ordinal of the section's day (0 when unknown)
    last_sent: npt.NDArray[np.float64]  # POSIX seconds of the section's newest message
    section_messages: list[list[int]]
    rows_by_message: dict[int, list[int]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """How many sections (rows) the matrix holds."""
        return int(self.matrix.shape[0])

    @property
    def nbytes(self) -> int:
        """Roughly the memory held: the arrays, plus ~100 bytes per message id in the look-ups."""
        arrays = self.matrix.nbytes + self.kinds.nbytes + self.day_segment_ids.nbytes
        arrays += self.days.nbytes + self.last_sent.nbytes
        ids = sum(len(ids) for ids in self.section_messages)
        return arrays + 100 * (ids + len(self.rows_by_message))

    def similarities(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine of every row with a unit query vector (rows are unit vectors)."""
        if self.size == 0:
            return np.zeros(0, dtype=np.float32)
        return np.asarray(self.matrix @ query, dtype=np.float32)


def _empty(version: tuple[int, int], dimensions: int) -> UserVectors:
    return UserVectors(
        version=version,
        matrix=np.zeros((0, dimensions), dtype=np.float32),
        kinds=np.zeros(0, dtype=np.int8),
        day_segment_ids=np.zeros(0, dtype=np.int64),
        days=np.zeros(0, dtype=np.int64),
        last_sent=np.zeros(0, dtype=np.float64),
        section_messages=[],
    )


class VectorCache:
    """Least-recently-used cache of `UserVectors`, one entry per user, for one embedder."""

    def __init__(
        self, *, embedder: str, dimensions: int, max_users: int = 64, max_bytes: int | None = None
    ) -> None:
        self.embedder = embedder
        self.dimensions = dimensions
        self.max_users = max_users
        self._entries: BoundedCache[int, UserVectors] = BoundedCache(
            max_entries=max_users, max_bytes=max_bytes, size_of=lambda vectors: vectors.nbytes
        )
        self._locks: KeyedLocks[int] = KeyedLocks()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, user_id: object) -> bool:
        return user_id in self._entries

    @property
    def locks_in_use(self) -> int:
        """Users whose matrix is being loaded right now."""
        return len(self._locks)

    @property
    def bytes(self) -> int:
        """Memory held by the cached matrices (as `UserVectors.nbytes` counts it)."""
        return self._entries.bytes

    def invalidate(self, user_id: int) -> None:
        """Forget a user's matrix (after their chunks changed or they were deleted)."""
        self._entries.pop(user_id)

    async def _version(self, session: AsyncSession, user_id: int) -> tuple[int, int]:
        row = (
            await session.execute(
                select(func.count(SearchChunk.id), func.max(SearchChunk.id)).where(
                    SearchChunk.user_id == user_id
                )
            )
        ).one()
        return int(row[0] or 0), int(row[1] or 0)

    async def get(self, session: AsyncSession, user_id: int) -> UserVectors:
        """The user's vectors, loaded on first use and reloaded when their chunks changed."""
        version = await self._version(session, user_id)
        cached = self._entries.get(user_id)
        if cached is not None and cached.version == version:
            return cached
        async with self._locks.hold(user_id):
            cached = self._entries.get(user_id)
            if cached is not None and cached.version == version:
                return cached
            loaded = await self._load(session, user_id, version)
            self._entries.put(user_id, loaded)
            return loaded

    async def _load(self, session: AsyncSession, user_id: int, version: tuple[int, int]) -> UserVectors:
        rows = (
            await session.execute(
                select(
                    SearchChunk.kind,
                    SearchChunk.day_segment_id,
                    SearchChunk.message_ids,
                    SearchChunk.sections,
                    SearchChunk.vectors,
                    SearchChunk.dimensions,
                    SearchChunk.last_sent_at,
                    DaySegment.day,
                )
                .outerjoin(DaySegment, DaySegment.id == SearchChunk.day_segment_id)
                .where(SearchChunk.user_id == user_id, SearchChunk.embedder == self.embedder)
                .order_by(SearchChunk.id)
            )
        ).all()
        blocks: list[npt.NDArray[np.float32]] = []
        kinds: list[int] = []
        segments: list[int] = []
        days: list[int] = []
        sent: list[float] = []
        section_messages: list[list[int]] = []
        for kind, segment_id, message_ids, sections, blob, dimensions, last_sent_at, day in rows:
            if dimensions != self.dimensions:
                continue
            vectors = np.frombuffer(blob, dtype=np.float32).reshape(-1, dimensions)
            blocks.append(vectors)
            for start, end in sections:
                kinds.append(KIND_SUMMARY if kind == "summary" else KIND_MESSAGES)
                segments.append(segment_id or 0)
                days.append(day.toordinal() if isinstance(day, date) else 0)
                sent.append(last_sent_at.timestamp())
                section_messages.append([int(i) for i in message_ids[start:end]])
        if not blocks:
            return _empty(version, self.dimensions)
        vectors_all = UserVectors(
            version=version,
            matrix=np.ascontiguousarray(np.vstack(blocks), dtype=np.float32),
            kinds=np.array(kinds, dtype=np.int8),
            day_segment_ids=np.array(segments, dtype=np.int64),
            days=np.array(days, dtype=np.int64),
            last_sent=np.array(sent, dtype=np.float64),
            section_messages=section_messages,
        )
        for row, ids in enumerate(section_messages):
            for message_id in ids:
                vectors_all.rows_by_message.setdefault(message_id, []).append(row)
        return vectors_all
