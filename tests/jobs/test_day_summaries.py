"""In-day summaries when due, and the nightly finalisation at each user's local midnight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.tokens import get_counter
from bench.clock import FrozenClock
from db.models import DaySegment, TranscriptMessage
from db.repositories.day_summaries import DAY_SUMMARY_FINAL_NOTE, DAY_SUMMARY_NOTE, flag_summary_due
from jobs.context import JobContext
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, seed_conversation

pytestmark = pytest.mark.both_databases


async def _segments(sessions: async_sessionmaker[AsyncSession]) -> list[DaySegment]:
    async with sessions() as session:
        return list((await session.execute(select(DaySegment).order_by(DaySegment.id))).scalars())


async def _notes(sessions: async_sessionmaker[AsyncSession]) -> list[str]:
    async with sessions() as session:
        stmt = (
            select(TranscriptMessage.content)
            .where(TranscriptMessage.kind == "note")
            .order_by(TranscriptMessage.id)
        )
        return list((await session.execute(stmt)).scalars())


async def _flag(
    sessions: async_sessionmaker[AsyncSession], *, threshold: int = 10, budget: int = 4000
) -> bool:
    async with sessions() as session, session.begin():
        segment = (await session.execute(select(DaySegment))).scalar_one()
        return await flag_summary_due(
            session, segment, threshold=threshold, token_budget=budget, count_tokens=get_counter().count
        )


async def test_ten_new_messages_make_the_day_due(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=["hi"] * 9, status="active")
    assert not await _flag(sessions)
    await seed_conversation(
        sessions, start=clock.now() + timedelta(minutes=20), texts=["hi"], status="active"
    )
    assert await _flag(sessions)
    assert (await _segments(sessions))[0].summary_due


async def test_raw_text_over_budget_makes_the_day_due(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=["word " * 300], status="active")
    assert not await _flag(sessions, budget=400)
    assert await _flag(sessions, budget=200)


async def test_due_day_is_summarised_by_the_job(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=[f"m{i}" for i in range(10)], status="active")
    await _flag(sessions)

    assert await run_job("day-summaries", ctx) == {"due": 1, "updated": 1, "failed": 0}

    segment = (await _segments(sessions))[0]
    assert segment.summary is not None and segment.summary.startswith("## Summary\nAna prepared")
    assert (segment.summary_due, segment.messages_since_summary) == (False, 0)
    assert segment.summary_updated_at == clock.now()
    assert await _notes(sessions) == [DAY_SUMMARY_NOTE]
    assert await run_job("day-summaries", ctx) == {"due": 0, "updated": 0, "failed": 0}
    # Only the new messages go to the next summary, on top of the previous one.
    await seed_conversation(
        sessions, start=clock.now() + timedelta(hours=1), texts=["later"], status="active"
    )
    async with sessions() as session, session.begin():
        (await session.execute(select(DaySegment))).scalar_one().summary_due = True
    await run_job("day-summaries", ctx)
    assert "later" in scripted.summary_prompts[1] and "m3" not in scripted.summary_prompts[1]
    assert "Ana prepared for her concert." in scripted.summary_prompts[1]
    assert await _notes(sessions) == [DAY_SUMMARY_NOTE, DAY_SUMMARY_NOTE]


async def test_failed_in_day_summary_is_flagged_again(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=[f"m{i}" for i in range(10)], status="active")
    await _flag(sessions)
    scripted.fail_summaries = 1

    assert await run_job("day-summaries", ctx) == {"due": 1, "updated": 0, "failed": 1}

    segment = (await _segments(sessions))[0]
    assert (segment.summary, segment.summary_due, segment.messages_since_summary) == (None, True, 10)
    assert await _notes(sessions) == []
    assert (await run_job("day-summaries", ctx))["updated"] == 1


async def test_nightly_finalises_each_day_at_its_users_midnight(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    day_start = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
    await seed_conversation(
        sessions, start=day_start, texts=["tokyo"], user_key="cli:tokyo", timezone="Asia/Tokyo"
    )
    await seed_conversation(
        sessions, start=day_start, texts=["ny"], user_key="cli:ny", timezone="America/New_York"
    )
    # 15:30 UTC on 3 March is 00:30 on 4 March in Tokyo and 10:30 on 3 March in New York.
    clock.current = datetime(2026, 3, 3, 15, 30, tzinfo=UTC)

    assert await run_job("nightly", ctx) == {"ended": 1, "finalised": 1, "failed": 0, "briefings_written": 0}

    tokyo, ny = await _segments(sessions)
    assert (tokyo.status, tokyo.finalized_at, ny.status) == ("final", clock.now(), "open")
    assert tokyo.summary is not None
    assert await _notes(sessions) == [DAY_SUMMARY_FINAL_NOTE]
    assert await run_job("nightly", ctx) == {"ended": 0, "finalised": 0, "failed": 0, "briefings_written": 0}
    clock.current = datetime(2026, 3, 4, 5, 1, tzinfo=UTC)  # 00:01 in New York
    assert (await run_job("nightly", ctx))["finalised"] == 1
    assert await _notes(sessions) == [DAY_SUMMARY_FINAL_NOTE, DAY_SUMMARY_FINAL_NOTE]


async def test_nightly_closes_an_already_summarised_day_without_a_new_note(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=["conversation 1: hi", "hello"])
    await run_job("postprocess", ctx)
    clock.advance(timedelta(days=1))

    assert (await run_job("nightly", ctx))["finalised"] == 1

    assert (await _segments(sessions))[0].status == "final"
    assert await _notes(sessions) == [DAY_SUMMARY_NOTE]
    assert len(scripted.summary_prompts) == 1
