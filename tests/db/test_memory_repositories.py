"""Memory repositories: idempotent inserts, user isolation, the day summary's version guard."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import FrozenClock
from db.models import ConversationThread, DaySegment, TranscriptMessage, UserFact
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.dedupe import dedupe_key
from db.repositories.facts import FactRepository
from db.repositories.thoughts import ThoughtRepository
from db.repositories.threads import ThreadRepository
from tests.jobs.conftest import seed_conversation

pytestmark = pytest.mark.both_databases


def test_dedupe_key_ignores_case_spacing_and_final_punctuation() -> None:
    assert dedupe_key("thread", 1, "Ask about  the Concert.") == dedupe_key(
        "thread", 1, "ask about the concert"
    )
    assert dedupe_key("thread", 1, "x") != dedupe_key("thread", 2, "x")
    assert len(dedupe_key("x")) == 64


async def test_inserts_are_idempotent(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock) -> None:
    user_id, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["hi"])
    for _ in range(2):
        async with sessions() as session, session.begin():
            threads = ThreadRepository(session)
            await threads.open_threads(
                user_id,
                conversation_id,
                [("topic", "cello"), ("topic", "Cello."), ("promise", "call")],
                clock.now(),
            )
            await ThoughtRepository(session).add_many(user_id, conversation_id, ["hm", "hm"], clock.now())
            await FactRepository(session).add_many(
                user_id, conversation_id, ["Likes tea"], clock.now(), source="tool"
            )
    async with sessions() as session, session.begin():
        # The same fact from another conversation is still one fact.
        assert (
            await FactRepository(session).add_many(user_id, None, ["likes tea."], clock.now(), source="tool")
            == 0
        )
    async with sessions() as session:
        assert len(await ThreadRepository(session).open_for(user_id)) == 2
        assert len(await ThoughtRepository(session).for_user(user_id)) == 1
        assert [f.content for f in await FactRepository(session).for_user(user_id)] == ["Likes tea"]


async def test_a_fact_learnt_again_gains_the_new_sources(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user_id, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["a", "b", "c"])
    for facts in (
        [("Ana plays the cello", [3, 1]), ("Ana plays the cello.", [2])],  # one statement, one fact
        [("ana plays the cello", [9, 1])],  # a later conversation says it again
        [("ana plays the cello", [9])],  # a rerun: nothing changes
    ):
        async with sessions() as session, session.begin():
            await FactRepository(session).add_sourced(
                user_id, conversation_id, facts, clock.now(), source="extraction"
            )
    async with sessions() as session:
        (fact,) = await FactRepository(session).for_user(user_id)
    assert (fact.content, fact.message_ids) == ("Ana plays the cello", [1, 2, 3, 9])


async def test_resolve_touches_only_the_users_open_threads(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ana, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["hi"])
    bo, bo_conversation = await seed_conversation(
        sessions, start=clock.now(), texts=["yo"], user_key="cli:bo"
    )
    async with sessions() as session, session.begin():
        await ThreadRepository(session).open_threads(ana, conversation_id, [("topic", "a")], clock.now())
        await ThreadRepository(session).open_threads(bo, bo_conversation, [("topic", "b")], clock.now())
    async with sessions() as session:
        ids = [t.id for t in (await session.execute(select(ConversationThread))).scalars()]

    async with sessions() as session, session.begin():
        assert await ThreadRepository(session).resolve(ana, ids, conversation_id, clock.now()) == 1
    async with sessions() as session, session.begin():
        assert await ThreadRepository(session).resolve(ana, ids, conversation_id, clock.now()) == 0

    async with sessions() as session:
        assert [t.content for t in await ThreadRepository(session).open_for(bo)] == ["b"]


async def test_summary_store_is_guarded_by_its_version(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    await seed_conversation(sessions, start=clock.now(), texts=["hi", "hello"])
    async with sessions() as session:
        segment = (await session.execute(select(DaySegment))).scalar_one()
        messages = list(await DaySummaryRepository(session).unsummarised(segment))

    results = []
    for _ in range(2):  # two writers that both started from "no summary yet"
        async with sessions() as session, session.begin():
            results.append(
                await DaySummaryRepository(session).store(
                    segment,
                    expected_last_id=None,
                    summary="## Summary\nhi",
                    key_moments=[],
                    last_message=messages[-1],
                    at=clock.now(),
                    final=False,
                )
            )

    assert results == [True, False]
    async with sessions() as session:
        notes = await session.scalar(
            select(func.count()).select_from(TranscriptMessage).where(TranscriptMessage.kind == "note")
        )
        assert notes == 1
        assert await session.scalar(select(func.count()).select_from(UserFact)) == 0
        stored = (await session.execute(select(DaySegment))).scalar_one()
        assert stored.last_summarized_message_id == messages[-1].id
        assert list(await DaySummaryRepository(session).unsummarised(stored)) == []
