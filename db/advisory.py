"""PostgreSQL advisory locks held on a connection of their own, for work that spans many transactions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine


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
