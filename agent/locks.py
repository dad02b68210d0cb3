"""Per-user turn serialisation: an asyncio lock in the process, an advisory lock across processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from db.engine import is_postgres

# Advisory lock keys are one bigint; the top bits say what is locked so jobs can use other spaces.
TURN_LOCK_SPACE = 1 << 56


class UserLocks:
    """Turns of one user run one at a time, in arrival order; different users run concurrently."""

    def __init__(self, engine: AsyncEngine, *, max_holders: int = 50) -> None:
        self._engine = engine
        self._locks: dict[int, asyncio.Lock] = {}
        self._waiters: dict[int, int] = {}
        # A lock is held on its own connection for a whole turn while the turn's queries use the
        # main pool; sharing one pool deadlocks once every pooled connection holds a lock.
        self._lock_engine: AsyncEngine | None = (
            create_async_engine(engine.url, pool_size=max_holders, max_overflow=0, pool_pre_ping=True)
            if is_postgres(engine)
            else None
        )

    async def close(self) -> None:
        """Release the lock connections."""
        if self._lock_engine is not None:
            await self._lock_engine.dispose()

    @asynccontextmanager
    async def hold(self, user_id: int) -> AsyncIterator[None]:
        """Hold the user's lock for the duration of a turn."""
        lock = self._locks.setdefault(user_id, asyncio.Lock())
        self._waiters[user_id] = self._waiters.get(user_id, 0) + 1
        try:
            async with lock:
                if self._lock_engine is not None:
                    async with self._advisory(self._lock_engine, TURN_LOCK_SPACE | user_id):
                        yield
                else:
                    # SQLite is the single-process embedded default: the asyncio lock is enough.
                    yield
        finally:
            self._waiters[user_id] -= 1
            if self._waiters[user_id] == 0:
                del self._waiters[user_id]
                self._locks.pop(user_id, None)

    @asynccontextmanager
    async def _advisory(self, engine: AsyncEngine, key: int) -> AsyncIterator[None]:
        # Session-level lock on an autocommit connection: no transaction stays open during the
        # model call, and the lock goes away with the connection if the process dies.
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(select(func.pg_advisory_lock(key)))
            try:
                yield
            finally:
                await conn.execute(select(func.pg_advisory_unlock(key)))
