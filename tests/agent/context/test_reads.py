"""The collectors' shared session: reads take turns on one session, and a read that fails or is
cancelled by its timeout leaves the next one a fresh session, not an aborted transaction or a busy
connection."""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.context.reads import Reader, SharedReads, read_in_turn

pytestmark = pytest.mark.both_databases


async def test_reads_share_one_session_one_at_a_time(sessions: async_sessionmaker[AsyncSession]) -> None:
    reads = SharedReads(sessions)
    used: list[AsyncSession] = []
    inside = 0

    async def load(session: AsyncSession) -> int:
        nonlocal inside
        inside += 1
        assert inside == 1  # never two reads on the session at once
        used.append(session)
        value = int(await session.scalar(text("SELECT 1")) or 0)
        await asyncio.sleep(0.01)
        inside -= 1
        return value

    try:
        assert await asyncio.gather(*(reads.run(load) for _ in range(4))) == [1, 1, 1, 1]
    finally:
        await reads.close()
    assert len(used) == 4 and all(session is used[0] for session in used)


async def test_a_failed_read_leaves_the_next_a_fresh_session(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    reads = SharedReads(sessions)
    seen: list[AsyncSession] = []

    async def missing(session: AsyncSession) -> None:
        seen.append(session)
        await session.execute(text("SELECT * FROM no_such_table"))

    async def one(session: AsyncSession) -> int:
        seen.append(session)
        return int(await session.scalar(text("SELECT 1")) or 0)

    try:
        with pytest.raises(SQLAlchemyError):
            await reads.run(missing)
        # On PostgreSQL the failed statement aborted its transaction: the next read must not be in it.
        assert await reads.run(one) == 1
    finally:
        await reads.close()
    assert seen[0] is not seen[1]


async def test_a_read_cancelled_by_its_timeout_leaves_the_next_a_fresh_session(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]
) -> None:
    reads = SharedReads(sessions)
    postgres = engine.dialect.name == "postgresql"

    async def slow(session: AsyncSession) -> None:
        if postgres:  # cancelled while the server is still running the query
            await session.execute(text("SELECT pg_sleep(5)"))
        else:
            await session.scalar(text("SELECT 1"))
            await asyncio.sleep(5)

    async def one(session: AsyncSession) -> int:
        return int(await session.scalar(text("SELECT 1")) or 0)

    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reads.run(slow), timeout=0.2)
        assert await asyncio.wait_for(reads.run(one), timeout=5) == 1
    finally:
        await reads.close()


async def test_on_postgresql_each_read_is_its_own_transaction(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]
) -> None:
    # No BEGIN and ROLLBACK around the reads: each statement's now() is its own (in one transaction
    # PostgreSQL's now() is the transaction's start, the same for every statement).
    if engine.dialect.name != "postgresql":
        pytest.skip("sqlite3 opens no transaction for a read")
    reads = SharedReads(sessions)

    async def now(session: AsyncSession) -> object:
        return await session.scalar(text("SELECT now()"))

    try:
        first = await reads.run(now)
        await asyncio.sleep(0.01)
        second = await reads.run(now)
    finally:
        await reads.close()
    assert first != second


async def test_each_collector_has_its_own_timeout_from_the_collection_start(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    reads = SharedReads(sessions)
    loop = asyncio.get_running_loop()
    started: list[str] = []

    def reader(name: str, limit: float, seconds: float) -> Reader:
        async def load(session: AsyncSession) -> int:
            started.append(name)
            value = int(await session.scalar(text("SELECT 1")) or 0)
            await asyncio.sleep(seconds)
            return value

        return Reader(name, limit, load, loop.create_future())

    slow, late, quick = reader("slow", 0.2, 5), reader("late", 0.1, 0), reader("quick", 5, 0)
    try:
        await read_in_turn(reads, [slow, late, quick], time.perf_counter())
    finally:
        await reads.close()
    assert slow.done.result().status == "timeout"
    # Its time was over before its turn came: not started at all.
    assert late.done.result().status == "timeout" and started == ["slow", "quick"]
    assert quick.done.result().status == "ok" and quick.done.result().value == 1
