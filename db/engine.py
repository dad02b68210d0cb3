"""The engine and session factory, built once at the entry point from a database URL."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

# A JSON "\u0000" escape: preceded by an even number of backslashes (an odd number means the
# backslash itself was escaped and the text is a literal "\u0000", which stays).
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def create_engine(url: str, *, pool_size: int = 10, foreign_keys: bool = True) -> AsyncEngine:
    """Create the async engine; for SQLite make the file's folder and turn on WAL and foreign keys.

    `foreign_keys=False` is for migrations only: rebuilding a parent table on SQLite (create a copy,
    drop the original, rename) would otherwise cascade-delete every child row with the DROP, and
    SQLite ignores `PRAGMA foreign_keys` inside the transaction Alembic runs in.

    Both databases get the same NUL rule: PostgreSQL rejects U+0000 in text and JSONB, so every
    string parameter and every JSON document loses its NUL characters on the way in.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": 30}, json_serializer=nul_free_json)
        event.listen(engine.sync_engine, "connect", partial(_sqlite_pragmas, foreign_keys=foreign_keys))
    else:
        engine = create_async_engine(
            url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            json_serializer=nul_free_json,
        )
    event.listen(engine.sync_engine, "before_cursor_execute", _strip_nul, retval=True)
    return engine


def nul_free_json(value: Any) -> str:
    """`json.dumps` without NUL characters in any string (keys included)."""
    text = json.dumps(value)
    return _JSON_NUL.sub(r"\1", text) if "\\u0000" in text else text


def _without_nul(value: Any) -> Any:
    return value.replace("\x00", "") if isinstance(value, str) and "\x00" in value else value


def _clean(parameters: Any) -> Any:
    if isinstance(parameters, dict):
        return {key: _without_nul(value) for key, value in parameters.items()}
    if isinstance(parameters, list | tuple):
        return type(parameters)(_without_nul(value) for value in parameters)
    return parameters


def _strip_nul(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> tuple[str, Any]:
    if executemany and isinstance(parameters, list | tuple):
        return statement, type(parameters)(_clean(row) for row in parameters)
    return statement, _clean(parameters)


def _sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry, *, foreign_keys: bool) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    # Freed cells and pages are zeroed, so deleted text (a /forget, an old copy of a rewritten
    # history) does not linger in the file; many builds default to it, this makes it every build's.
    cursor.execute("PRAGMA secure_delete=ON")
    cursor.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded objects usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def is_postgres(engine: AsyncEngine) -> bool:
    """True when the engine talks to PostgreSQL (advisory locks, SKIP LOCKED, tsvector)."""
    return engine.dialect.name == "postgresql"
