"""The engine and session factory, built once at the entry point from a database URL."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolResetState

from db.search_text import search_text
from db.sqlite_trips import one_trip_connector

# A JSON "\u0000" escape: preceded by an even number of backslashes (an odd number means the
# backslash itself was escaped and the text is a literal "\u0000", which stays).
_JSON_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
# Characters a Python string can hold but UTF-8 cannot encode.
_SURROGATE = re.compile("[\ud800-\udfff]")


def create_engine(url: str, *, pool_size: int = 10, foreign_keys: bool = True) -> AsyncEngine:
    """Create the async engine; for SQLite make the file's folder and turn on WAL and foreign keys.

    `foreign_keys=False` is for migrations only: rebuilding a parent table on SQLite (create a copy,
    drop the original, rename) would otherwise cascade-delete every child row with the DROP, and
    SQLite ignores `PRAGMA foreign_keys` inside the transaction Alembic runs in.

    Both databases get the same text rule: PostgreSQL rejects U+0000 in text and JSONB, so every
    string parameter and every JSON document loses its NUL characters on the way in; a lone
    surrogate (JSON's `"\\ud800"` parses into one, UTF-8 cannot encode it, and neither database
    stores it) becomes U+FFFD there too.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        # Pooled like PostgreSQL: a turn's context opens one session per collector at once, and an
        # overflow connection (a new thread and file handle, closed on return) costs more than a query.
        # (An in-memory database has one static connection, no pool to size.)
        pooled = (
            {"pool_size": pool_size, "max_overflow": pool_size}
            if database not in (None, "", ":memory:")
            else {}
        )
        # The pool's own rollback on return is `_rollback_if_open`: a session closed after reads alone
        # already rolled back, and a second rollback is one more trip to the connection's thread.
        # One trip to the connection's thread per statement (db/sqlite_trips.py), opened with the
        # arguments SQLAlchemy's dialect makes from the URL.
        args, kwargs = SQLiteDialect_aiosqlite().create_connect_args(parsed)
        engine = create_async_engine(
            url,
            async_creator=one_trip_connector(args, {**kwargs, "timeout": 30}),
            json_serializer=storable_json,
            pool_reset_on_return=None,
            **pooled,
        )
        event.listen(engine.sync_engine, "connect", partial(_sqlite_pragmas, foreign_keys=foreign_keys))
        event.listen(engine.sync_engine.pool, "reset", _rollback_if_open)
    else:
        engine = create_async_engine(
            url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_pre_ping=True,
            json_serializer=storable_json,
        )
    event.listen(engine.sync_engine, "before_cursor_execute", _storable_parameters, retval=True)
    return engine


def storable_json(value: Any) -> str:
    """`json.dumps` without NUL characters, and with U+FFFD for lone surrogates, in any string (keys too).

    Written as UTF-8 rather than ASCII escapes: a lone surrogate is then a character of the text,
    found and replaced by the same C-speed pass as in a string parameter (scanning escapes instead
    cost a hundred times more on a message full of emoji).
    """
    text = json.dumps(value, ensure_ascii=False)
    if "\\u0000" in text:
        text = _JSON_NUL.sub(r"\1", text)
    return _without_surrogates(text)


def storable_text(value: str) -> str:
    """`value` without NUL characters and with U+FFFD for each lone surrogate (pairs are joined)."""
    return _without_surrogates(value.replace("\x00", "") if "\x00" in value else value)


def _without_surrogates(value: str) -> str:
    if value.isascii() or _SURROGATE.search(value) is None:
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _clean(parameters: Any) -> Any:
    if isinstance(parameters, dict):
        values: Any = parameters.values()
    elif isinstance(parameters, list | tuple):
        values = parameters
    else:
        return parameters
    # Every statement's parameters pass here: an ASCII string without NUL is storable as it is, told
    # apart in C, and only the others go through `storable_text`.
    cleaned = [
        storable_text(value) if isinstance(value, str) and ("\x00" in value or not value.isascii()) else value
        for value in values
    ]
    return (
        dict(zip(parameters, cleaned, strict=True))
        if isinstance(parameters, dict)
        else type(parameters)(cleaned)
    )


def _storable_parameters(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> tuple[str, Any]:
    if executemany and isinstance(parameters, list | tuple):
        return statement, type(parameters)(_clean(row) for row in parameters)
    return statement, _clean(parameters)


def _rollback_if_open(dbapi_connection: Any, _record: ConnectionPoolEntry, state: PoolResetState) -> None:
    """The pool's reset on return for SQLite: a rollback only when a transaction is still open.

    SQLite knows for itself whether one is (`in_transaction` is read without the connection's
    thread). A connection dropped by the garbage collector is never reset here: the pool ends it.
    """
    if state.transaction_was_reset or not state.asyncio_safe:
        return
    if getattr(dbapi_connection.driver_connection, "in_transaction", True):
        dbapi_connection.rollback()


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
    # The full-text triggers index `nikita_search_text(content)` (db/ddl/search.py).
    dbapi_connection.create_function("nikita_search_text", 1, search_text, deterministic=True)


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded objects usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)
