"""Per-user turn serialisation: an asyncio lock in the process, an advisory lock across processes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agent.core.bounded import KeyedLocks
from db.engine import is_postgres

# Advisory lock keys are one bigint; the top bits say what is locked so jobs can use other spaces.
TURN_LOCK_SPACE = 1 << 56


@asynccontextmanager
async def advisory_lock(engine: AsyncEngine, key: int, *, shared: bool = False) -> AsyncIterator[None]:
    """Hold a PostgreSQL advisory lock (exclusive, or shared with other shared holders) for the body.

    Session-level lock on an autocommit connection: no transaction stays open while it is held,
    and the lock goes away with the connection if the process dies.
    """
    take, release = (
        (func.pg_advisory_lock_shared, func.pg_advisory_unlock_shared)
        if shared
        else (func.pg_advisory_lock, func.pg_advisory_unlock)
    )
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(select(take(key)))
        try:
            yield
        finally:
            await conn.execute(select(release(key)))


class UserLocks:
    """Turns of one user run one at a time, in arrival order; different users run concurrently."""

    def __init__(self, engine: AsyncEngine, *, max_holders: int = 50) -> None:
        self._engine = engine
        # A user's lock exists only while a turn holds or awaits it: bounded by turns in flight.
        self._locks: KeyedLocks[int] = KeyedLocks()
        # A lock is held on its own connection for a whole turn while the turn's queries use the
        # main pool; sharing one pool deadlocks once every pooled connection holds a lock.
        self._lock_engine: AsyncEngine | None = (
            create_async_engine(engine.url, pool_size=max_holders, max_overflow=0, pool_pre_ping=True)
            if is_postgres(engine)
            else None
        )

    def __len__(self) -> int:
        """Users whose lock is held or awaited right now."""
        return len(self._locks)

    async def close(self) -> None:
        """Release the lock connections."""
        if self._lock_engine is not None:
            await self._lock_engine.dispose()

    @asynccontextmanager
    async def hold(self, user_id: int) -> AsyncIterator[None]:
        """Hold the user's lock for the duration of a turn."""
        async with self._locks.hold(user_id):
            if self._lock_engine is not None:
                async with advisory_lock(self._lock_engine, TURN_LOCK_SPACE | user_id):
                    yield
            else:
                # SQLite is the single-process embedded default: the asyncio lock is enough.
                yield
