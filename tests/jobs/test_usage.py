"""Cost in view: post-processing's model calls and tokens land per user and day, and the
admin reports show them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.reports.texts import stats_report, user_report
from bench.clock import FrozenClock
from db.models import ModelUsage, User
from jobs.context import JobContext
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, seed_conversation

pytestmark = pytest.mark.both_databases

TEXTS = ["conversation 1: my concert is on Friday", "good luck!", "and I got a job offer", "tell me more"]


async def _usage(sessions: async_sessionmaker[AsyncSession]) -> dict[tuple[int, str], ModelUsage]:
    async with sessions() as session:
        rows = (await session.execute(select(ModelUsage))).scalars().all()
    return {(row.user_id, row.kind): row for row in rows}


async def test_postprocessing_records_calls_and_tokens_per_user_and_day(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    user_id, _ = await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    other_id, _ = await seed_conversation(
        sessions, start=clock.now(), texts=["hi"], user_key="cli:bo", status="active"
    )

    await run_job("postprocess", ctx)

    usage = await _usage(sessions)
    assert set(usage) == {(user_id, "extraction"), (user_id, "day_summary")}
    extraction, summary = usage[(user_id, "extraction")], usage[(user_id, "day_summary")]
    assert (extraction.calls, summary.calls) == (1, 1)
    assert extraction.day == clock.now().date()
    # FunctionModel estimates tokens from what it was really sent: the prompt with the conversation.
    assert extraction.input_tokens > len(" ".join(TEXTS).split())
    assert extraction.output_tokens > 0 and summary.input_tokens > 0
    assert len(scripted.extraction_prompts) == 1

    # A second conversation the same day adds to the same counters.
    clock.advance(timedelta(hours=1))
    await seed_conversation(sessions, start=clock.now(), texts=["conversation 2: hello", "hi"])
    await run_job("postprocess", ctx)
    again = await _usage(sessions)
    assert again[(user_id, "extraction")].calls == 2
    assert again[(user_id, "extraction")].input_tokens > extraction.input_tokens

    async with sessions() as session:
        telegram_id = 4242
        user = await session.get(User, user_id)
        assert user is not None
        user.telegram_id = telegram_id
        await session.commit()
    report = await user_report(sessions, telegram_id, clock.now())
    day = clock.now().date().isoformat()
    assert f"{day}: 4 calls" in report and "day_summary 2, extraction 2" in report
    stats = await stats_report(sessions, clock.now(), queue_depth=0, failures=0)
    assert "model use today (UTC): 4 calls" in stats
    # Nothing was spent on the other user, and the report for a week later shows no spend today.
    assert all(uid != other_id for uid, _ in again)
    later = await stats_report(sessions, clock.now() + timedelta(days=8), queue_depth=0, failures=0)
    assert "model use today (UTC): no model calls" in later


async def test_failed_extraction_still_counts_nothing_it_did_not_spend(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    scripted.fail_extractions = 1
    await run_job("postprocess", ctx)
    assert await _usage(sessions) == {}
