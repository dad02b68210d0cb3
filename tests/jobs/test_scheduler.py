"""The scheduler wiring: the per-minute jobs and the nightly finalisation, on APScheduler."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.clock import FrozenClock
from jobs.context import JobContext
from jobs.scheduler import run_minute_jobs, schedule_jobs
from tests.jobs.conftest import seed_conversation


async def test_jobs_are_scheduled_every_minute_and_nightly(ctx: JobContext) -> None:
    scheduler = AsyncIOScheduler()

    schedule_jobs(scheduler, ctx)

    jobs = {job.id: job for job in scheduler.get_jobs()}
    assert set(jobs) == {"nikita-minute-jobs", "nikita-nightly", "nikita-retention", "nikita-retention-sweep"}
    minute, nightly = jobs["nikita-minute-jobs"].trigger, jobs["nikita-nightly"].trigger
    retention = jobs["nikita-retention"].trigger
    assert isinstance(retention, IntervalTrigger) and retention.interval.total_seconds() == 60 * 60
    sweep = jobs["nikita-retention-sweep"]
    assert sweep.kwargs == {"sweep": True} and sweep.misfire_grace_time is None  # once, however late
    assert isinstance(minute, IntervalTrigger) and minute.interval.total_seconds() == 60
    assert isinstance(nightly, IntervalTrigger) and nightly.interval.total_seconds() == 15 * 60
    assert jobs["nikita-minute-jobs"].max_instances == 1


async def test_minute_jobs_close_process_and_summarise(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jobs.registry")
    await run_minute_jobs(ctx)
    assert [r.message for r in caplog.records if r.levelno >= logging.INFO] == []  # nothing to do: quiet
    await seed_conversation(sessions, start=clock.now(), texts=["conversation 1: hi", "hey"], status="active")
    clock.advance(timedelta(minutes=ctx.settings.conversation_timeout_minutes + 2))

    results = await run_minute_jobs(ctx)

    assert results["close-idle-conversations"] == {"closed": 1}
    assert results["postprocess"]["processed"] == 1
    assert results["consolidate"]["consolidated"] == 1  # its new facts are tidied in the same run
    # With the graph off, the person's changed facts are marked as followed: nothing waits.
    assert results["graph"]["followed"] == (ctx.settings.graph_backend == "none")
    assert results["day-summaries"]["due"] == 0
    done = {
        r.__dict__["job"] for r in caplog.records if r.message == "job done" and r.levelno == logging.INFO
    }
    # The scheduler runs it by its alias; the log names the job by its own name.
    assert done - {"graph"} == {"close-idle-conversations", "postprocess", "consolidate"}
