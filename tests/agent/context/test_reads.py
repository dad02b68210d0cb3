"""The collectors' shared session: reads take turns on one session, and a read that fails or is
cancelled by its timeout leaves the next one a fresh session, not an aborted transaction or a busy
connection."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.context.reads import SharedReads

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
