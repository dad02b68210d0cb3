"""SQLite's statements in one trip each to the connection's thread.

aiosqlite runs a connection's sqlite3 calls on a thread of its own, and each call is a trip there
and back through the event loop. SQLAlchemy's adapter makes four of them for a statement that returns
rows (open a cursor, execute, fetch the rows, close the cursor) and three for one that does not.
`OneTripConnection` opens the cursor, executes, fetches every row and closes the cursor in one
call on the thread; the adapter then reads the rows, the row count and the last row id without
another trip. Everything else (commit, rollback, close, functions) is aiosqlite's own.

Every row is fetched at once, as SQLAlchemy's adapter does for every cursor but a server-side one
(which nothing here uses: `fetchone` and `fetchmany` would read the rows already fetched).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import Any

import aiosqlite

# Rows a sqlite3 cursor returns; None for a statement that returns none (no description).
type _Rows = list[Any] | None


def _execute(
    connection: sqlite3.Connection, sql: str, parameters: Iterable[Any], many: bool
) -> tuple[sqlite3.Cursor, _Rows]:
    """On the connection's thread: the statement run, its rows fetched and the cursor closed."""
    cursor = connection.cursor()
    try:
        if many:
            cursor.executemany(sql, parameters)
        else:
            cursor.execute(sql, parameters)  # type: ignore[arg-type]
        rows = cursor.fetchall() if cursor.description is not None else None
    finally:
        # A closed sqlite3 cursor still answers description, rowcount and lastrowid.
        cursor.close()
    return cursor, rows


class OneTripCursor(aiosqlite.Cursor):
    """An aiosqlite cursor whose execute brings back the rows with it (see the module doc)."""

    def __init__(self, connection: OneTripConnection) -> None:
        super().__init__(connection, connection.idle_cursor)
        self._rows: list[Any] = []

    async def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> OneTripCursor:
        """Run the statement and fetch its rows, in one trip."""
        return await self._run(sql, () if parameters is None else parameters, many=False)

    async def executemany(self, sql: str, parameters: Iterable[Iterable[Any]]) -> OneTripCursor:
        """Run the statement once for each set of parameters, in one trip."""
        return await self._run(sql, parameters, many=True)

    async def _run(self, sql: str, parameters: Iterable[Any], *, many: bool) -> OneTripCursor:
        connection = self._conn
        queued: Callable[..., Awaitable[tuple[sqlite3.Cursor, _Rows]]] = connection._execute
        cursor, rows = await queued(_execute, connection._conn, sql, parameters, many)
        self._cursor, self._rows = cursor, rows or []
        return self

    async def fetchone(self) -> Any:
        """The next row fetched, or None."""
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        """Up to `size` (the cursor's array size) of the rows fetched."""
        count = self.arraysize if size is None else size
        rows, self._rows = self._rows[:count], self._rows[count:]
        return rows

    async def fetchall(self) -> list[Any]:
        """Every row fetched and not yet read."""
        rows, self._rows = self._rows, []
        return rows

    async def close(self) -> None:
        """Nothing to do on the thread: the cursor was closed with its statement."""
        self._rows = []


class _OpenedCursor:
    """What `Connection.cursor()` returns: awaited or entered, a one-trip cursor, without a trip."""

    def __init__(self, connection: OneTripConnection) -> None:
        self.connection = connection

    def __await__(self) -> Any:
        return self._open().__await__()

    async def _open(self) -> OneTripCursor:
        return OneTripCursor(self.connection)

    async def __aenter__(self) -> OneTripCursor:
        return OneTripCursor(self.connection)

    async def __aexit__(self, *exc: object) -> None:
        return None


class OneTripConnection(aiosqlite.Connection):
    """An aiosqlite connection whose cursors make one trip per statement."""

    # Stands in for the sqlite3 cursor until the first statement brings a real one back.
    idle_cursor: Any = None

    def cursor(self) -> Any:
        """A cursor, made on the thread at its first statement."""
        return _OpenedCursor(self)


def one_trip_connector(args: Sequence[Any], kwargs: dict[str, Any]) -> Callable[[], Any]:
    """SQLAlchemy's `async_creator` for SQLite: a one-trip connection opened with `sqlite3.connect`'s
    arguments (those SQLAlchemy's dialect makes from the URL, with the engine's `connect_args`)."""

    async def connect() -> OneTripConnection:
        connection = OneTripConnection(partial(sqlite3.connect, *args, **kwargs), 64)
        # As SQLAlchemy does for aiosqlite: a connection left open never holds the process at exit.
        connection._thread.daemon = True
        await connection
        return connection

    return connect
