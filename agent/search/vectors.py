"""Per-user vector matrices in memory, brute-force cosine with numpy (no pgvector / sqlite-vec here).

A user's section vectors are read from `search_chunks` once and stacked into one float32 matrix;
a search is one matrix-vector product. The cache entry is keyed by the user's chunk count and
newest chunk id, so a chunk written by this or another process is seen at the next search.
The cache is bounded by users and by bytes; a user's load lock lives only while it is in use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Text, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.bounded import BoundedCache, KeyedLocks
from db.models import DaySegment, SearchChunk

KIND_MESSAGES = 0
KIND_SUMMARY = 1
KIND_FACT = 2  # one fact, its one section holding the messages it comes from
_KINDS = {"messages": KIND_MESSAGES, "summary": KIND_SUMMARY, "fact": KIND_FACT}


@dataclass
class UserVectors:
    """Every embedded section of one user: row-aligned arrays, and the message ids of each row.

    The message ids are one flat array cut by `offsets` (row r holds
    `message_ids[offsets[r]:offsets[r + 1]]`), so a 100,000-message user loads without a Python
    object per id; `rows_of` answers the reverse look-up by binary search.
    """

    version: tuple[int, int]
    matrix: npt.NDArray[np.float32]
    kinds: npt.NDArray[np.int8]
    day_segment_ids: npt.NDArray[np.int64]
    days: npt.NDArray[np.int64]  # date ordinal of the section's day (0 when unknown)
    last_sent: npt.NDArray[np.float64]  # POSIX seconds of the section's newest message
    message_ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    offsets: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    _by_id: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None

    @property
    def size(self) -> int:
        """How many sections (rows) the matrix holds."""
        return int(self.matrix.shape[0])

    @property
    def nbytes(self) -> int:
        """The memory held: every array, the message ids and, once built, their reverse look-up."""
        arrays = self.matrix.nbytes + self.kinds.nbytes + self.day_segment_ids.nbytes
        arrays += self.days.nbytes + self.last_sent.nbytes
        # The reverse look-up (`rows_of`) holds two more arrays of the ids' length when built.
        return arrays + self.offsets.nbytes + 3 * self.message_ids.nbytes

    def similarities(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine of every row with a unit query vector (rows are unit vectors)."""
        if self.size == 0:
            return np.zeros(0, dtype=np.float32)
        return np.asarray(self.matrix @ query, dtype=np.float32)

    def section_messages(self, row: int) -> list[int]:
        """The message ids embedded in one row."""
        return [int(i) for i in self.message_ids[self.offsets[row] : self.offsets[row + 1]]]

    def rows_of(self, message_id: int) -> list[int]:
        """The rows (sections) holding a message."""
        if self._by_id is None:
            rows = np.repeat(np.arange(self.size, dtype=np.int64), np.diff(self.offsets))
            order = np.argsort(self.message_ids, kind="stable")
            self._by_id = (self.message_ids[order], rows[order])
        ids, rows = self._by_id
        left, right = np.searchsorted(ids, [message_id, message_id + 1])
        return [int(r) for r in rows[left:right]]


def _empty(version: tuple[int, int], dimensions: int) -> UserVectors:
    return UserVectors(
        version=version,
        matrix=np.zeros((0, dimensions), dtype=np.float32),
        kinds=np.zeros(0, dtype=np.int8),
        day_segment_ids=np.zeros(0, dtype=np.int64),
        days=np.zeros(0, dtype=np.int64),
        last_sent=np.zeros(0, dtype=np.float64),
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

    def holds(self, user_id: int) -> bool:
        """True when the user's matrix is in memory (whatever its version)."""
        return user_id in self._entries

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
        # The JSON columns come as text and are decoded in one call: per-row decoding was a third
        # of the time of loading a 100,000-message user.
        rows = (
            await session.execute(
                select(
                    SearchChunk.kind,
                    SearchChunk.day_segment_id,
                    cast(SearchChunk.message_ids, Text),
                    cast(SearchChunk.sections, Text),
                    SearchChunk.vectors,
                    SearchChunk.dimensions,
                    SearchChunk.last_sent_at,
                    DaySegment.day,
                )
                .outerjoin(DaySegment, DaySegment.id == SearchChunk.day_segment_id)
                .where(
                    SearchChunk.user_id == user_id,
                    SearchChunk.embedder == self.embedder,
                    SearchChunk.dimensions == self.dimensions,
                )
                .order_by(SearchChunk.id)
            )
        ).all()
        if not rows:
            return _empty(version, self.dimensions)
        decoded = json.loads("[" + ",".join(f"[{r[2]},{r[3]}]" for r in rows) + "]")
        flat: list[int] = []
        lengths: list[int] = []
        per_chunk: list[int] = []
        for message_ids, sections in decoded:
            per_chunk.append(len(sections))
            for start, end in sections:
                flat.extend(message_ids[start:end])
                lengths.append(end - start)
        counts = np.array(per_chunk, dtype=np.int64)

        def each_row(values: list[float] | list[int], dtype: type) -> npt.NDArray[Any]:
            return np.repeat(np.array(values, dtype=dtype), counts)

        return UserVectors(
            version=version,
            matrix=np.frombuffer(b"".join(r[4] for r in rows), dtype=np.float32)
            .reshape(-1, self.dimensions)
            .copy(),
            kinds=each_row([_KINDS.get(r[0], KIND_MESSAGES) for r in rows], np.int8),
            day_segment_ids=each_row([r[1] or 0 for r in rows], np.int64),
            days=each_row([r[7].toordinal() if isinstance(r[7], date) else 0 for r in rows], np.int64),
            last_sent=each_row([r[6].timestamp() for r in rows], np.float64),
            message_ids=np.array(flat, dtype=np.int64),
            offsets=np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))),
        )
