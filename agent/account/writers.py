"""Writers of a user's data that /forget must wait for: registered here, checked, awaited.

Database rows need no help: every table references `users` with ON DELETE CASCADE, ids are never
reused, and a writer's transaction checks the user row (`db.repositories.users.user_present`, which on
PostgreSQL also takes a FOR KEY SHARE lock, so the delete waits for that transaction and then
removes its rows too). What the database cannot protect are writes elsewhere: the knowledge graph
and the in-memory caches. For those, the protocol is *register, then check, then write*:

- a writer registers (`registered`/`writing`), then checks that the user still exists, then writes;
- `/forget` deletes the user row first, then `wait_for_writers`, then clears the other stores.

A writer that checked before the delete is registered, so forget waits for it and deletes what it
wrote; a writer that checks after the delete finds no user and writes nothing. Across processes
(PostgreSQL) an external write also holds a shared advisory lock on the user, and forget takes the
exclusive one, which waits for every other process's writers the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from agent.core.errors import UserForgottenError
from db.advisory import advisory_lock
from db.repositories.users import user_present

# Advisory lock keys are one bigint; the top bits say what is locked, so other uses get their own space.
WRITER_LOCK_SPACE = 2 << 56


class WriteGuard:
    """Counts each user's writers in flight in this process; /forget waits until there are none."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        engine: AsyncEngine | None = None,
        lock_connections: int = 5,
    ) -> None:
        self.sessions = sessions
        self._active: dict[int, int] = {}
        self._idle: dict[int, asyncio.Future[None]] = {}
        # External writes hold their shared advisory lock for the whole write (a graph episode takes
        # seconds, and /forget's exclusive lock waits behind it), on a connection of their own: such
        # a write runs its own queries on the query pool meanwhile, so holding the lock on a pooled
        # connection would deadlock once every pooled connection held one and waited for another.
        # The main pool cannot stand in either, because the lock must outlive the write's transactions
        # (a graph write is not a database transaction at all).
        self._lock_engine: AsyncEngine | None = (
            create_async_engine(
                engine.url, pool_size=lock_connections, max_overflow=lock_connections * 4, pool_pre_ping=True
            )
            if engine is not None and engine.dialect.name == "postgresql"
            else None
        )

    def __len__(self) -> int:
        """Users with a writer in flight (the map never holds more)."""
        return len(self._active)

    async def close(self) -> None:
        """Release the lock connections."""
        if self._lock_engine is not None:
            await self._lock_engine.dispose()

    @asynccontextmanager
    async def registered(self, user_id: int) -> AsyncIterator[None]:
        """Count the body as a writer of the user; the body checks the user in its own transaction."""
        self._active[user_id] = self._active.get(user_id, 0) + 1
        if user_id not in self._idle:
            self._idle[user_id] = asyncio.get_running_loop().create_future()
        try:
            yield
        finally:
            self._active[user_id] -= 1
            if self._active[user_id] == 0:
                del self._active[user_id]
                idle = self._idle.pop(user_id)
                if not idle.done():
                    idle.set_result(None)

    @asynccontextmanager
    async def writing(self, user_id: int) -> AsyncIterator[None]:
        """Register an external write (the graph), hold the user's shared lock, check the user exists.

        Raises `UserForgottenError` when the user is gone: nothing must be written for them.
        """
        async with self.registered(user_id), self._shared(user_id):
            async with self.sessions() as session:
                present = await user_present(session, user_id)
            if not present:
                raise UserForgottenError(f"user {user_id} was forgotten")
            yield

    async def wait_for_writers(self, user_id: int) -> None:
        """Return once every writer of the user registered before this call has finished."""
        while (idle := self._idle.get(user_id)) is not None:
            await asyncio.shield(idle)
        if self._lock_engine is not None:
            # Granted once no other process holds the shared lock: their writers are done.
            async with advisory_lock(self._lock_engine, WRITER_LOCK_SPACE | user_id):
                pass

    @asynccontextmanager
    async def _shared(self, user_id: int) -> AsyncIterator[None]:
        if self._lock_engine is None:
            yield
            return
        async with advisory_lock(self._lock_engine, WRITER_LOCK_SPACE | user_id, shared=True):
            yield
