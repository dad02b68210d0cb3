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

# A JSON escape of NUL, of a surrogate pair, or of a lone surrogate, preceded by an even number of
# backslashes (an odd number means the backslash itself was escaped: the text is a literal "\u0000",
# which stays). `json.dumps` writes lowercase hex and every character beyond the BMP as a pair.
_JSON_UNSTORABLE = re.compile(
    r"(?<!\\)((?:\\\\)*)\\u(?:(d[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2})|(0000)|d[89a-f][0-9a-f]{2})"
)
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
        engine = create_async_engine(url, connect_args={"timeout": 30}, json_serializer=storable_json)
        event.listen(engine.sync_engine, "connect", partial(_sqlite_pragmas, foreign_keys=foreign_keys))
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
    """`json.dumps` without NUL characters, and with U+FFFD for lone surrogates, in any string (keys too)."""
    text = json.dumps(value)
    if "\\u0000" in text or "\\ud" in text:
        return _JSON_UNSTORABLE.sub(_storable_escape, text)
    return text


def _storable_escape(match: re.Match[str]) -> str:
    backslashes, pair, nul = match.groups()
    if pair is not None:
        return f"{backslashes}\\u{pair}"
    return backslashes if nul is not None else f"{backslashes}\\ufffd"


def storable_text(value: str) -> str:
    """`value` without NUL characters and with U+FFFD for each lone surrogate (pairs are joined)."""
    if "\x00" in value:
        value = value.replace("\x00", "")
    if not value.isascii() and _SURROGATE.search(value):
        value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value


def _storable(value: Any) -> Any:
    return storable_text(value) if isinstance(value, str) else value


def _clean(parameters: Any) -> Any:
    if isinstance(parameters, dict):
        return {key: _storable(value) for key, value in parameters.items()}
    if isinstance(parameters, list | tuple):
        return type(parameters)(_storable(value) for value in parameters)
    return parameters


def _storable_parameters(
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
    cursor.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded objects usable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def is_postgres(engine: AsyncEngine) -> bool:
    """True when the engine talks to PostgreSQL (advisory locks, SKIP LOCKED, tsvector)."""
    return engine.dialect.name == "postgresql"
