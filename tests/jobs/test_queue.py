"""Claiming, retries with backoff, stale claims, requeue and stats, on both databases."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.clock import FrozenClock
from db.models import Conversation, ConversationThread, DaySegment
from db.work import dead_items
from jobs.context import JobContext
from jobs.errors import UnknownJobError
from jobs.queue import claim_and_read, queue_stats, requeue
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, seed_conversation

pytestmark = pytest.mark.both_databases


async def _conversation(sessions: async_sessionmaker[AsyncSession], conversation_id: int) -> Conversation:
    async with sessions() as session:
        conversation = await session.get(Conversation, conversation_id)
    assert conversation is not None
    return conversation


async def test_model_failing_twice_then_succeeding_is_processed_once(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    _, conversation_id = await seed_conversation(
        sessions, start=clock.now(), texts=["conversation 1: hi", "hey"]
    )
    scripted.fail_extractions = 2

    assert (await run_job("postprocess", ctx))["failed"] == 1
    failed_once = await _conversation(sessions, conversation_id)
    assert (failed_once.status, failed_once.attempts) == ("closed", 1)
    assert failed_once.next_attempt_at == clock.now() + timedelta(seconds=60)
    assert (await run_job("postprocess", ctx))["claimed"] == 0  # not due yet
    clock.advance(timedelta(seconds=61))
    assert (await run_job("postprocess", ctx))["failed"] == 1
    assert (await _conversation(sessions, conversation_id)).next_attempt_at == clock.now() + timedelta(
        seconds=120
    )
    clock.advance(timedelta(seconds=121))
    assert (await run_job("postprocess", ctx))["processed"] == 1

    done = await _conversation(sessions, conversation_id)
    assert (done.status, done.attempts, done.last_error) == ("processed", 3, None)
    assert len(scripted.extraction_prompts) == 3
    assert scripted.extractions_per_conversation() == {1: 3}
    async with sessions() as session:
        assert len((await session.execute(select(ConversationThread))).scalars().all()) == 2


async def test_gives_up_as_failed_after_max_attempts(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    ctx.settings = ctx.settings.model_copy(update={"postprocess_max_attempts": 2})
    _, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["hi"])
    scripted.fail_extractions = 10

    await run_job("postprocess", ctx)
    clock.advance(timedelta(hours=2))
    await run_job("postprocess", ctx)
    clock.advance(timedelta(hours=2))

    assert (await run_job("postprocess", ctx))["claimed"] == 0
    failed = await _conversation(sessions, conversation_id)
    assert (failed.status, failed.attempts) == ("failed", 2)
    assert failed.last_error is not None and "529" in failed.last_error
    stats = await queue_stats(sessions)
    assert stats.failed == 1 and "failed: 1" in stats.format()
    async with sessions() as session:
        assert (await dead_items(session)).counts["post-processing"] == 1
    # /reprocess: back in the queue, due now, with a fresh attempt count.
    assert await requeue(sessions, conversation_id, clock.now())
    scripted.fail_extractions = 0
    assert (await run_job("postprocess", ctx))["processed"] == 1
    assert (await _conversation(sessions, conversation_id)).attempts == 1
    async with sessions() as session:
        assert (await dead_items(session)).counts["post-processing"] == 0


async def test_stale_claim_of_a_dead_worker_is_taken_over(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    _, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["hi"])
    timeout = timedelta(seconds=ctx.settings.postprocess_claim_timeout_seconds)
    claimed = await claim_and_read(
        sessions, "dead-worker", clock.now(), timeout, lambda s, i: s.get(Conversation, i)
    )
    assert claimed is not None and claimed[0] == conversation_id and claimed[1].claimed_by == "dead-worker"

    assert (await run_job("postprocess", ctx))["claimed"] == 0
    clock.advance(timeout + timedelta(seconds=1))
    assert (await run_job("postprocess", ctx))["processed"] == 1

    done = await _conversation(sessions, conversation_id)
    assert (done.status, done.attempts) == ("processed", 2)


async def test_concurrent_workers_claim_each_conversation_once(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    for i in range(12):
        await seed_conversation(
            sessions, start=clock.now(), texts=[f"conversation {i}: hello"], user_key=f"cli:user{i}"
        )
    other = dataclasses.replace(ctx, worker_id="worker-b")

    results = await asyncio.gather(run_job("postprocess", ctx), run_job("postprocess", other))

    assert sum(r["processed"] for r in results) == 12
    assert scripted.extractions_per_conversation() == {i: 1 for i in range(12)}


async def test_requeue_refuses_active_and_unknown_conversations(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    _, active_id = await seed_conversation(sessions, start=clock.now(), texts=["hi"], status="active")

    assert not await requeue(sessions, active_id, clock.now())
    assert not await requeue(sessions, 999_999, clock.now())


async def test_queue_stats_count_each_status(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=["a"], user_key="cli:a", status="active")
    await seed_conversation(sessions, start=clock.now(), texts=["b"], user_key="cli:b")
    await seed_conversation(sessions, start=clock.now(), texts=["c"], user_key="cli:c", status="processed")
    async with sessions() as session, session.begin():
        (await session.execute(select(DaySegment).limit(1))).scalar_one().summary_due = True

    stats = await queue_stats(sessions)

    assert (stats.active, stats.queued, stats.processing, stats.processed) == (1, 1, 0, 1)
    assert stats.day_summaries_due == 1
    assert "queued (closed): 1" in stats.format()


async def test_conversation_job_closes_idle_conversations(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    _, idle_id = await seed_conversation(
        sessions, start=clock.now(), texts=["a"], user_key="cli:a", status="active"
    )
    clock.advance(timedelta(minutes=10))
    _, fresh_id = await seed_conversation(
        sessions, start=clock.now(), texts=["b"], user_key="cli:b", status="active"
    )
    clock.advance(timedelta(minutes=6))

    assert await run_job("close-idle-conversations", ctx) == {"closed": 1}

    assert (await _conversation(sessions, idle_id)).status == "closed"
    assert (await _conversation(sessions, fresh_id)).status == "active"
    assert (await run_job("postprocess", ctx))["processed"] == 1


async def test_unknown_job_is_refused(ctx: JobContext) -> None:
    with pytest.raises(UnknownJobError, match="known: close-idle-conversations"):
        await run_job("reindex", ctx)


async def test_claim_and_read_reads_the_claimed_row_before_the_claim_commits(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    _, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["hi"])
    timeout = timedelta(minutes=15)

    async def read(session: AsyncSession, claimed_id: int) -> tuple[str, str | None, bool]:
        row = (
            await session.execute(
                select(Conversation.status, Conversation.claimed_by).where(Conversation.id == claimed_id)
            )
        ).one()
        return row.status, row.claimed_by, session.in_transaction()

    claimed = await claim_and_read(sessions, "worker-a", clock.now(), timeout, read)

    assert claimed == (conversation_id, ("processing", "worker-a", True))
    claim = await _conversation(sessions, conversation_id)
    assert (claim.status, claim.claimed_by, claim.attempts) == ("processing", "worker-a", 1)
    # Idle: nothing is claimed and nothing read.
    assert await claim_and_read(sessions, "worker-b", clock.now(), timeout, read) is None


async def test_a_read_that_fails_leaves_the_conversation_unclaimed(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    _, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["hi"])

    async def read(session: AsyncSession, claimed_id: int) -> None:
        raise OSError("connection lost")

    with pytest.raises(OSError):
        await claim_and_read(sessions, "worker-a", clock.now(), timedelta(minutes=15), read)

    untouched = await _conversation(sessions, conversation_id)
    assert (untouched.status, untouched.claimed_by, untouched.attempts) == ("closed", None, 0)
