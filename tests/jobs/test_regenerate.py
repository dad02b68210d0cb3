"""Rewriting a day's summary on the user's request (the timeline's "Regenerate summary")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.clock import FrozenClock
from db.models import DaySegment, ModelUsage, TranscriptMessage
from db.repositories.day_summaries import DAY_SUMMARY_NOTE, DAY_SUMMARY_REGENERATED_NOTE, DaySummaryRepository
from jobs import regenerate
from jobs.context import JobContext
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, seed_conversation


async def _segment(sessions: async_sessionmaker[AsyncSession]) -> DaySegment:
    async with sessions() as session:
        return (await session.execute(select(DaySegment))).scalar_one()


async def _notes(sessions: async_sessionmaker[AsyncSession]) -> list[str]:
    async with sessions() as session:
        stmt = select(TranscriptMessage.content).where(TranscriptMessage.kind == "note")
        return list((await session.execute(stmt.order_by(TranscriptMessage.id))).scalars())


async def _request(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock) -> bool:
    async with sessions() as session, session.begin():
        segment = (await session.execute(select(DaySegment))).scalar_one()
        return await DaySummaryRepository(session).request_regeneration(segment.id, clock.now())


async def test_a_requested_rewrite_reads_the_whole_day_afresh(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=[f"m{i}" for i in range(10)], status="active")
    async with sessions() as session, session.begin():
        (await session.execute(select(DaySegment))).scalar_one().summary_due = True
    await run_job("day-summaries", ctx)
    before = await _segment(sessions)
    assert before.summary is not None

    assert await _request(sessions, clock)
    assert not await _request(sessions, clock)  # asked twice, queued once
    clock.advance(timedelta(minutes=5))
    assert await run_job("day-summaries", ctx) == {"due": 1, "updated": 1, "failed": 0}

    after = await _segment(sessions)
    # Every message of the day went to the model, and the old summary did not.
    prompt = scripted.summary_prompts[-1]
    assert all(f"] m{i}" in prompt for i in range(10))
    assert "Previous summary:\n(none yet)" in prompt
    assert after.summary_updated_at == clock.now() and after.regenerate_requested_at is None
    # The rewrite's model call is counted with the day summaries' (cost in view).
    async with sessions() as session:
        calls = (
            await session.execute(select(ModelUsage.calls).where(ModelUsage.kind == "day_summary"))
        ).scalar_one()
    assert calls == 2  # the first summary and the rewrite
    assert await _notes(sessions) == [DAY_SUMMARY_NOTE, DAY_SUMMARY_REGENERATED_NOTE]
    assert await run_job("day-summaries", ctx) == {"due": 0, "updated": 0, "failed": 0}


async def test_a_final_day_can_be_rewritten_and_stays_final(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=["hi", "hello"])
    clock.advance(timedelta(days=1))
    await run_job("nightly", ctx)
    finalised = await _segment(sessions)
    assert finalised.status == "final"

    await _request(sessions, clock)
    clock.advance(timedelta(minutes=1))
    assert (await run_job("day-summaries", ctx))["updated"] == 1

    after = await _segment(sessions)
    assert (after.status, after.finalized_at) == ("final", finalised.finalized_at)
    assert after.summary_updated_at == clock.now()
    assert "the day is over" in scripted.summary_prompts[-1]


async def test_a_long_day_is_rewritten_in_batches_that_fold_into_each_other(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await seed_conversation(
        sessions, start=clock.now(), texts=[f"m{i}" for i in range(7)], step=timedelta(seconds=10)
    )
    monkeypatch.setattr(regenerate, "BATCH_MESSAGES", 3)
    await _request(sessions, clock)
    assert (await run_job("day-summaries", ctx))["updated"] == 1
    assert len(scripted.summary_prompts) == 3
    assert "(none yet)" in scripted.summary_prompts[0]
    assert "Ana prepared for her concert." in scripted.summary_prompts[1]
    assert "] m6" in scripted.summary_prompts[2] and "] m0" not in scripted.summary_prompts[2]


async def test_a_failed_rewrite_is_asked_again_and_leaves_the_day_as_it_was(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=["hi", "hello"], status="active")
    await _request(sessions, clock)
    scripted.fail_summaries = 1

    assert await run_job("day-summaries", ctx) == {"due": 1, "updated": 0, "failed": 1}

    segment = await _segment(sessions)
    assert (segment.summary, segment.regenerate_requested_at) == (None, clock.now())
    assert await _notes(sessions) == []
    assert (await run_job("day-summaries", ctx))["updated"] == 1
