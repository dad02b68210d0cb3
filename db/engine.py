"""The engine and session factory, built once at the entry point from a database URL."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry


def create_engine(url: str, *, pool_size: int = 10, foreign_keys: bool = True) -> AsyncEngine:
    """Create the async engine; for SQLite make the file's folder and turn on WAL and foreign keys.

    `foreign_keys=False` is for migrations only: rebuilding a parent table on SQLite (create a copy,
    drop the original, rename) would otherwise cascade-delete every child row with the DROP, and
    SQLite ignores `PRAGMA foreign_keys` inside the transaction Alembic runs in.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", partial(_sqlite_pragmas, foreign_keys=foreign_keys))
        return engine
    return create_async_engine(url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry, *, foreign_keys: bool) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded objects usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def is_postgres(engine: AsyncEngine) -> bool:
    """True when the engine talks to PostgreSQL (advisory locks, SKIP LOCKED, tsvector)."""
    return engine.dialect.name == "postgresql"
