"""A cancelled write transaction must not leave the database locked for everyone else."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.clock import FrozenClock
from db.inbox import InboxRepository, NewUpdate
from db.models import InboxUpdate
from db.uninterrupted import uninterrupted

pytestmark = pytest.mark.both_databases

# A statement that keeps the connection busy for a while (both databases run it).
SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1500000) SELECT count(*) FROM c"
)


def update(update_id: int) -> NewUpdate:
    return NewUpdate(update_id, 7, 7, {"update_id": update_id})


async def write_then_linger(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, started: asyncio.Event
) -> None:
    async with sessions() as session, session.begin():
        await InboxRepository(session).add([update(1)], now=clock.now())
        started.set()
        await session.execute(text(SLOW))


async def test_a_cancelled_writer_finishes_its_statement_and_leaves_the_lock(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    started = asyncio.Event()
    writer = asyncio.create_task(uninterrupted(write_then_linger(sessions, clock, started)))
    await started.wait()
    await asyncio.sleep(0.05)  # inside the slow statement
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer

    # Another writer gets through at once (on SQLite, a cut statement held the lock for busy_timeout).
    async with asyncio.timeout(10), sessions() as session, session.begin():
        await InboxRepository(session).add([update(2)], now=clock.now())
    async with sessions() as session:
        kept = set((await session.scalars(select(InboxUpdate.update_id))).all())
    assert kept == {1, 2}  # the cancelled caller's transaction ran to its commit, then it was cancelled


async def test_the_result_and_errors_of_the_work_pass_through() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    async def fail() -> None:
        await asyncio.sleep(0)
        raise LookupError("no such row")

    assert await uninterrupted(answer()) == 42
    with pytest.raises(LookupError, match="no such row"):
        await uninterrupted(fail())


async def test_a_timeout_still_reaches_the_caller_after_the_work_ended() -> None:
    finished: list[str] = []

    async def work() -> None:
        await asyncio.sleep(0.2)
        finished.append("done")

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await uninterrupted(work())
    assert finished == ["done"]
