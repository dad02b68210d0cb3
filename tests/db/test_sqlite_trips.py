"""SQLite's statements make one trip each to the connection's thread, and read as they always did."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select, text, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from db.engine import create_engine
from db.sqlite_trips import OneTripConnection

_metadata = MetaData()
_notes = Table(
    "notes",
    _metadata,
    Column("id", Integer, primary_key=True),
    Column("body", String, nullable=False, unique=True),
)


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'trips.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(_metadata.create_all)
    yield engine
    await engine.dispose()


class _Trips:
    """Counts the calls a connection queues for its thread (aiosqlite's one way there)."""

    def __init__(self, driver: OneTripConnection) -> None:
        self.count = 0
        queue: Callable[..., Awaitable[Any]] = driver._execute

        async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await queue(fn, *args, **kwargs)

        driver._execute = counted  # type: ignore[method-assign]


async def _trips(conn: AsyncConnection) -> _Trips:
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    assert isinstance(driver, OneTripConnection)
    return _Trips(driver)


async def test_a_statement_is_one_trip_whether_or_not_it_returns_rows(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        trips = await _trips(conn)
        before = trips.count
        inserted = await conn.execute(insert(_notes).values(body="first"))
        assert trips.count - before == 1
        assert inserted.inserted_primary_key == (1,)
        before = trips.count
        rows = (await conn.execute(select(_notes.c.id, _notes.c.body))).all()
        assert trips.count - before == 1
        assert [tuple(row) for row in rows] == [(1, "first")]
        before = trips.count
        returned = (
            await conn.execute(insert(_notes).values(body="second").returning(_notes.c.id))
        ).scalar_one()
        assert trips.count - before == 1
        assert returned == 2


async def test_row_counts_many_rows_and_empty_results_read_as_before(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(_notes), [{"body": f"note {n}"} for n in range(250)])
        marked = update(_notes).where(_notes.c.id <= 100).values(body=_notes.c.body + "!")
        changed = await conn.execute(marked)
        assert changed.rowcount == 100
        assert (await conn.execute(select(_notes).where(_notes.c.id > 1_000))).all() == []
        bodies = (await conn.execute(select(_notes.c.body).order_by(_notes.c.id))).scalars().all()
        assert len(bodies) == 250
        assert bodies[0] == "note 0!" and bodies[-1] == "note 249"


async def test_a_refused_statement_raises_and_the_connection_goes_on(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        await conn.execute(insert(_notes).values(body="once"))
        await conn.commit()
        with pytest.raises(IntegrityError):
            await conn.execute(insert(_notes).values(body="once"))
        await conn.rollback()
        with pytest.raises(OperationalError):
            await conn.execute(text("SELECT * FROM no_such_table"))
        await conn.rollback()
        assert (await conn.execute(select(_notes.c.body))).scalars().all() == ["once"]


async def test_the_driver_cursor_reads_its_rows_one_at_a_time_or_in_batches(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(_notes), [{"body": f"n{n}"} for n in range(5)])
        driver = (await conn.get_raw_connection()).driver_connection
        assert isinstance(driver, OneTripConnection)
        async with driver.cursor() as cursor:
            await cursor.execute("SELECT body FROM notes ORDER BY id")
            assert [column[0] for column in cursor.description] == ["body"]
            assert await cursor.fetchone() == ("n0",)
            assert await cursor.fetchmany(2) == [("n1",), ("n2",)]
            assert await cursor.fetchall() == [("n3",), ("n4",)]
            assert await cursor.fetchone() is None
            await cursor.execute("UPDATE notes SET body = body || '?' WHERE id > ?", (3,))
            assert cursor.rowcount == 2
            assert await cursor.fetchall() == []
        cursor = await driver.cursor()
        with pytest.raises(sqlite3.OperationalError):
            await cursor.execute("SELEC nothing")
