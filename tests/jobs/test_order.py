"""A user's conversations are post-processed one at a time, oldest first, across workers and instances."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from bench.clock import FrozenClock
from db.engine import create_engine, session_factory
from db.models import Conversation
from db.work import Retry
from jobs.context import JobContext
from jobs.queue import claim_and_read, mark_processed, record_failure
from jobs.registry import run_job
from tests.jobs.conftest import MARKER, ScriptedSummaries, seed_conversation


async def _statuses(sessions: async_sessionmaker[AsyncSession], ids: list[int]) -> list[tuple[str, int]]:
    async with sessions() as session:
        rows = {c.id: c for c in (await session.execute(select(Conversation))).scalars()}
    return [(rows[i].status, rows[i].attempts) for i in ids]


async def _three_conversations(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock) -> list[int]:
    """Ana's conversations 1, 2 and 3, an hour apart, all closed and due."""
    ids = []
    for n in (1, 2, 3):
        _, conversation_id = await seed_conversation(
            sessions, start=clock.now() - timedelta(hours=4 - n), texts=[f"conversation {n}: hi", "hey"]
        )
        ids.append(conversation_id)
    return ids


def _extraction_order(scripted: ScriptedSummaries) -> list[int]:
    return [int(m.group(1)) for p in scripted.extraction_prompts if (m := MARKER.search(p))]


@pytest.mark.both_databases
async def test_a_failed_older_conversation_holds_the_newer_ones_until_it_is_done(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    ids = await _three_conversations(sessions, clock)
    scripted.fail_extractions = 1

    assert await run_job("postprocess", ctx) == {"claimed": 1, "processed": 0, "failed": 1}
    assert await _statuses(sessions, ids) == [("closed", 1), ("closed", 0), ("closed", 0)]
    clock.advance(timedelta(seconds=61))
    assert await run_job("postprocess", ctx) == {"claimed": 3, "processed": 3, "failed": 0}

    assert _extraction_order(scripted) == [1, 1, 2, 3]
    assert await _statuses(sessions, ids) == [("processed", 2), ("processed", 1), ("processed", 1)]


@pytest.mark.both_databases
async def test_a_conversation_given_up_as_failed_releases_the_next(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    ctx.settings = ctx.settings.model_copy(update={"postprocess_max_attempts": 2})
    ids = await _three_conversations(sessions, clock)
    scripted.fail_extractions = 2

    assert (await run_job("postprocess", ctx))["claimed"] == 1
    assert await _statuses(sessions, ids) == [("closed", 1), ("closed", 0), ("closed", 0)]
    clock.advance(timedelta(seconds=61))
    assert await run_job("postprocess", ctx) == {"claimed": 3, "processed": 2, "failed": 1}

    assert _extraction_order(scripted) == [1, 1, 2, 3]
    assert await _statuses(sessions, ids) == [("failed", 2), ("processed", 1), ("processed", 1)]


@pytest.mark.both_databases
async def test_a_live_claim_holds_the_users_next_conversation_and_a_stale_one_is_taken_over(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    ids = await _three_conversations(sessions, clock)
    timeout = timedelta(seconds=ctx.settings.postprocess_claim_timeout_seconds)
    claimed = await claim_and_read(
        sessions, "dead-worker", clock.now(), timeout, lambda s, i: s.get(Conversation, i)
    )
    assert claimed is not None and claimed[0] == ids[0] and claimed[1].claimed_by == "dead-worker"

    assert (await run_job("postprocess", ctx))["claimed"] == 0
    clock.advance(timeout + timedelta(seconds=1))
    assert await run_job("postprocess", ctx) == {"claimed": 3, "processed": 3, "failed": 0}

    assert _extraction_order(scripted) == [1, 2, 3]
    assert await _statuses(sessions, ids) == [("processed", 2), ("processed", 1), ("processed", 1)]


@dataclass(frozen=True)
class Attempt:
    """One claim of a conversation, from the claim to just before its outcome was recorded."""

    user_id: int
    conversation_id: int
    start: int
    end: int
    worker: str


async def _seed_users(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, *, users: int, per_user: int
) -> dict[int, list[int]]:
    """Users whose conversations follow each other in time, inserted in a shuffled order.

    Some users have two conversations ending at the same instant (then the id decides). Returns each
    user's conversation ids in the order they must be processed.
    """
    rng = random.Random(7)
    user_ids = []
    for u in range(users):
        user, _ = await get_or_create_user(
            sessions, key=f"cli:order{u}", now=clock.now(), timezone="UTC", name=f"U{u}"
        )
        user_ids.append(user.id)
    plan = []
    for u, user_id in enumerate(user_ids):
        for k in range(per_user):
            minute = u * per_user + k - (1 if u % 5 == 0 and k == 2 else 0)  # a tie with conversation k=1
            plan.append((user_id, clock.now() - timedelta(days=1) + timedelta(minutes=minute)))
    rng.shuffle(plan)
    async with sessions() as session, session.begin():
        rows = [
            Conversation(
                user_id=user_id,
                status="closed",
                started_at=ended_at - timedelta(minutes=1),
                last_message_at=ended_at,
                ended_at=ended_at,
                messages=[],
                message_count=2,
            )
            for user_id, ended_at in plan
        ]
        session.add_all(rows)
        await session.flush()
        order: dict[int, list[int]] = defaultdict(list)
        for row in sorted(rows, key=lambda c: (c.ended_at, c.id)):
            order[row.user_id].append(row.id)
    return order


@pytest.mark.slow
@pytest.mark.both_databases
async def test_two_instances_with_two_workers_each_keep_every_users_order(
    database_url: str, engine: AsyncEngine, clock: FrozenClock
) -> None:
    """Two engines (two instances), two workers each, driving the real claim and outcome functions.

    Every claim of a user's conversation starts after the previous one ended, in the user's order;
    the recorder stands in for the pipeline.
    """
    engine_b = create_engine(database_url, pool_size=4)
    instances = {"a": session_factory(engine), "b": session_factory(engine_b)}
    order = await _seed_users(instances["a"], clock, users=40, per_user=4)
    users_order = list(order.values())
    fail_once = {ids[0] for ids in users_order[::3]}  # retried with no backoff, still first
    give_up = {ids[1] for ids in users_order[1::7]}  # failed for good: the next one is released
    total = sum(len(ids) for ids in users_order)
    now, timeout = clock.now(), timedelta(hours=1)

    ticks = itertools.count()
    attempts: list[Attempt] = []
    finished: set[int] = set()
    progress = asyncio.Event()
    failed_once: set[int] = set()

    async def worker(name: str, sessions: async_sessionmaker[AsyncSession]) -> None:
        while len(finished) < total:
            claimed = await claim_and_read(sessions, name, now, timeout, lambda s, i: s.get(Conversation, i))
            conversation_id = claimed[0] if claimed else None
            if conversation_id is None:
                progress.clear()
                # Woken by another worker's outcome; the short timeout only guards against a claim
                # that returned None while a row was briefly locked by a claim that also found none.
                try:
                    await asyncio.wait_for(progress.wait(), timeout=0.05)
                except TimeoutError:
                    pass
                continue
            start = next(ticks)
            async with sessions() as session:  # the pipeline's first read, on this instance
                claimed = await session.get(Conversation, conversation_id)
            assert claimed is not None and claimed.claimed_by == name
            await asyncio.sleep(0)
            end = next(ticks)
            attempts.append(Attempt(claimed.user_id, conversation_id, start, end, name))
            if conversation_id in give_up or (
                conversation_id in fail_once and conversation_id not in failed_once
            ):
                failed_once.add(conversation_id)
                status = await record_failure(
                    sessions,
                    conversation_id,
                    name,
                    "scripted",
                    now,
                    retry=Retry(2 if conversation_id in give_up else 5, 0, 0),
                )
                if status == "failed":
                    finished.add(conversation_id)
            else:
                async with sessions() as session, session.begin():
                    assert await mark_processed(session, conversation_id, name, now, summary=None, tone=None)
                finished.add(conversation_id)
            progress.set()

    try:
        await asyncio.wait_for(
            asyncio.gather(*(worker(f"{i}{n}", s) for i, s in instances.items() for n in (1, 2))), 120
        )
    finally:
        await engine_b.dispose()

    per_user: dict[int, list[Attempt]] = defaultdict(list)
    for attempt in sorted(attempts, key=lambda a: a.start):
        per_user[attempt.user_id].append(attempt)
    for user_attempts in per_user.values():
        for before, after in itertools.pairwise(user_attempts):
            assert before.end < after.start, f"overlap within a user: {before} and {after}"
    for user_id, ids in order.items():
        seen = [a.conversation_id for a in per_user[user_id]]
        # Retries repeat a conversation in place; nothing newer runs before it is done or given up.
        assert list(dict.fromkeys(seen)) == ids and seen == sorted(seen, key=ids.index), seen
    every = [i for ids in users_order for i in ids]
    expected = [("failed", 2) if i in give_up else ("processed", 2 if i in fail_once else 1) for i in every]
    assert await _statuses(instances["a"], every) == expected
    assert {a.worker[0] for a in attempts} == {"a", "b"}  # both instances took a share
