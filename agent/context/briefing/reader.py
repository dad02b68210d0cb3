"""Reading users' briefings on the turn's path, a query only when the briefing may have changed.

A briefing is written only when a user's package fingerprint differs from the stored one's, so a
briefing read once stays the right one for every turn whose package has its fingerprint. The
reader keeps the last one read per user (bounded by users and bytes) and queries again only when
the turn's package has another fingerprint, or when it holds none for the user (then the query
runs beside the collectors). /forget drops what it holds for the user.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.context.reads import Collected, collect
from agent.core.bounded import BoundedCache
from db.repositories.briefings import BriefingRepository, StoredBriefing

# Reading one row by its key: a database slower than this has the turn served by v1.
READ_TIMEOUT_SECONDS = 2.0


def _size(briefing: StoredBriefing) -> int:
    return len(briefing.text.encode()) + len(briefing.voice.encode()) + 512


class BriefingReader:
    """The stored briefings of the users this process has served, read through a bounded cache."""

    def __init__(self, *, max_users: int = 2048, max_bytes: int = 16_000_000) -> None:
        self._held: BoundedCache[int, StoredBriefing] = BoundedCache(
            max_entries=max_users, max_bytes=max_bytes, size_of=_size
        )

    def start(
        self, sessions: async_sessionmaker[AsyncSession], user_id: int
    ) -> Awaitable[Collected[StoredBriefing]] | None:
        """A read started now, beside the collectors, when nothing is held for the user."""
        if user_id in self._held:
            return None
        return asyncio.ensure_future(self._read(sessions, user_id))

    async def finish(
        self,
        sessions: async_sessionmaker[AsyncSession],
        user_id: int,
        stamp: str,
        started: Awaitable[Collected[StoredBriefing]] | None,
    ) -> Collected[StoredBriefing]:
        """The user's briefing for a package with fingerprint `stamp`: held, started, or read now."""
        if started is not None:
            return await started
        held = self._held.get(user_id)
        if held is not None and held.fingerprint == stamp:
            return Collected(held, "ok", 0.0)
        return await self._read(sessions, user_id)

    async def _read(
        self, sessions: async_sessionmaker[AsyncSession], user_id: int
    ) -> Collected[StoredBriefing]:
        async def read() -> StoredBriefing | None:
            async with sessions() as session:
                return await BriefingRepository(session).get(user_id)

        collected = await collect("briefing", READ_TIMEOUT_SECONDS, read)
        if collected.value is not None:
            self._held.put(user_id, collected.value)
        return collected

    def drop_user(self, user_id: int) -> None:
        """Forget the user's briefing (/forget)."""
        self._held.pop(user_id)
