"""/memory's list of what was left open: the newest first, threads noted in the same moment (one
post-processing run notes several) by the order they were noted, on both databases."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.reports.texts import MEMORY_THREADS, memory_report
from bench.clock import FrozenClock
from db.models import ConversationThread
from tests.agent.search.corpus import add_user

pytestmark = pytest.mark.both_databases


async def test_threads_noted_at_once_are_listed_newest_first(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana = await add_user(sessions, "cli:ana")
    async with sessions() as session, session.begin():
        for n in range(1, MEMORY_THREADS + 2):
            session.add(
                ConversationThread(
                    user_id=ana,
                    type="question",
                    content=f"open thread {n}",
                    dedupe_key=f"thread-{n}",
                    created_at=clock.now(),
                )
            )
            await session.flush()  # noted one after the other, as a run notes them
    report = await memory_report(sessions, ana, clock.now())
    listed = [line.removeprefix("- ") for line in report.splitlines() if line.startswith("- open thread")]
    assert listed == [f"open thread {n}" for n in range(MEMORY_THREADS + 1, 1, -1)]
