"""The import pacer queues imported conversations for post-processing at the operator's pace: a few
per run, oldest first, in turns across people, none past a person's import cap, none of a run still
storing; on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.clock import FrozenClock
from db.models import IMPORT_WAITING, QUEUED, Conversation
from db.repositories.usage import UsageRepository
from jobs.context import JobContext
from jobs.registry import run_job
from tests.jobs.import_helpers import import_run, imported_conversation, person

pytestmark = pytest.mark.both_databases

OLD = datetime(2024, 3, 12, 10, 0, tzinfo=UTC)


async def _statuses(sessions: async_sessionmaker[AsyncSession]) -> dict[int, str]:
    async with sessions() as session:
        return {i: s for i, s in (await session.execute(select(Conversation.id, Conversation.status))).all()}


async def _conversations(
    sessions: async_sessionmaker[AsyncSession], user_id: int, count: int, clock: FrozenClock, **run: str
) -> list[int]:
    import_id = await import_run(sessions, user_id, at=clock.now(), **run)
    ids = []
    for n in range(count):
        at = OLD + timedelta(days=count - n)  # stored newest first: the pacer still takes the oldest
        conversation, _ = await imported_conversation(
            sessions,
            user_id,
            import_id,
            [("user", f"question {n}", at), ("other", f"answer {n}", at + timedelta(minutes=1))],
            external_id=f"{user_id}-{n}",
            today=clock.now(),
        )
        ids.append(conversation)
    return ids[::-1]  # oldest first


async def test_a_run_queues_a_few_oldest_first_in_turns_across_people(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ctx.settings.import_conversations_per_run = 3
    ana = await _conversations(sessions, await person(sessions, "cli:ana", now=clock.now()), 4, clock)
    ben = await _conversations(sessions, await person(sessions, "cli:ben", now=clock.now()), 2, clock)

    assert (await run_job("imports", ctx))["queued"] == 3
    statuses = await _statuses(sessions)
    queued = {i for i, s in statuses.items() if s == QUEUED}
    # Ana's two oldest and Ben's oldest: in turns, each person's oldest first.
    assert queued == {ana[0], ana[1], ben[0]}

    # Three in flight: a second run adds none until the worker takes them.
    assert (await run_job("imports", ctx))["queued"] == 0
    assert (await run_job("postprocess", ctx, limit=2))["processed"] == 2
    assert (await run_job("imports", ctx))["queued"] == 2
    statuses = await _statuses(sessions)
    # The worker took the two oldest (Ana's and Ben's first); Ana's next waits its turn in the queue,
    # and the two free places go one to each.
    assert [statuses[i] for i in ana] == ["processed", QUEUED, QUEUED, IMPORT_WAITING]
    assert [statuses[i] for i in ben] == ["processed", QUEUED]

    # Nothing waits for a pace of 0.
    ctx.settings.import_conversations_per_run = 0
    assert (await run_job("imports", ctx))["queued"] == 0


async def test_a_person_past_their_import_cap_waits_and_a_run_still_storing_waits(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ctx.settings.import_conversations_per_run = 10
    ctx.settings.import_daily_tokens = 1000
    ana_id = await person(sessions, "cli:ana", now=clock.now())
    ben_id = await person(sessions, "cli:ben", now=clock.now())
    ana = await _conversations(sessions, ana_id, 2, clock)
    ben = await _conversations(sessions, ben_id, 2, clock, status="running")
    async with sessions() as session, session.begin():
        # Ana spent her import tokens today; her chat spend is another matter.
        await UsageRepository(session).add(
            ana_id, clock.now().date(), "import", calls=3, input_tokens=900, output_tokens=100
        )

    counts = await run_job("imports", ctx)
    assert counts == {"queued": 0, "waiting_people": 1, "capped_people": 1, "told": 0}
    assert {(await _statuses(sessions))[i] for i in ana + ben} == {IMPORT_WAITING}

    # The import's spend never counts against her daily cap for chat.
    async with sessions() as session:
        everyone, hers, _ = await UsageRepository(session).spent_by_owner(clock.now().date(), ana_id)
    assert (everyone, hers) == (1000, 0)

    # The next UTC day she has her cap again.
    clock.advance(timedelta(days=1))
    assert (await run_job("imports", ctx))["queued"] == 2
    assert {(await _statuses(sessions))[i] for i in ana} == {QUEUED}
