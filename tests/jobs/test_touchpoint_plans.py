"""Post-processing plans follow-ups from the extraction, once, at the user's local time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.clock import FrozenClock
from db.models import ConversationThread, Touchpoint
from jobs.context import JobContext
from jobs.queue import requeue
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, extraction_reply, seed_conversation

pytestmark = pytest.mark.both_databases

INTERVIEW = "Ana's interview on Thursday"


async def test_the_thursday_interview_is_planned_for_friday_afternoon_local(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    user_id, conversation_id = await seed_conversation(
        sessions,
        start=clock.now(),
        texts=["conversation 1: my interview is on Thursday", "good luck!"],
        timezone="Europe/Paris",
    )
    scripted.extraction = extraction_reply(
        threads_to_open=[
            {"type": "follow_up", "content": INTERVIEW, "follow_up_at": "2026-03-06 15:00"},
            {"type": "topic", "content": "Ana likes jazz"},
        ]
    )
    await run_job("postprocess", ctx)
    # The extractor was told when the conversation ended, in the user's own time.
    assert "Tuesday 2026-03-03 10:01 (Europe/Paris)" in scripted.extraction_prompts[0]
    async with sessions() as session:
        (row,) = (await session.execute(select(Touchpoint))).scalars().all()
        thread = await session.scalar(
            select(ConversationThread).where(ConversationThread.content == INTERVIEW)
        )
    assert thread is not None
    assert (row.user_id, row.thread_id, row.conversation_id) == (user_id, thread.id, conversation_id)
    assert (row.status, row.reason, row.timezone) == ("planned", INTERVIEW, "Europe/Paris")
    assert row.due_at == datetime(2026, 3, 6, 14, 0, tzinfo=UTC)  # 15:00 in Paris

    # A rerun (the stored extraction reused) plans nothing twice: the idempotency key.
    await requeue(sessions, conversation_id, clock.now())
    await run_job("postprocess", ctx)
    async with sessions() as session:
        assert len((await session.execute(select(Touchpoint))).scalars().all()) == 1
