"""Memory repositories: idempotent inserts, user isolation, the day summary's version guard."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.clock import FrozenClock
from db.models import ConversationThread, DaySegment, FactConsolidation, Thought, TranscriptMessage, UserFact
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.dedupe import dedupe_key
from db.repositories.facts import FactRepository
from db.repositories.thoughts import ThoughtRepository
from db.repositories.threads import ThreadRepository
from tests.facts import add_facts
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
            await add_facts(
                FactRepository(session), user_id, conversation_id, ["Likes tea"], clock.now(), source="tool"
            )
    async with sessions() as session, session.begin():
        # The same fact from another conversation is still one fact.
        assert (
            await add_facts(
                FactRepository(session), user_id, None, ["likes tea."], clock.now(), source="tool"
            )
            == 0
        )
    async with sessions() as session:
        assert len(await ThreadRepository(session).open_for(user_id)) == 2
        assert await session.scalar(select(func.count()).where(Thought.user_id == user_id)) == 1
        assert [f.content for f in await FactRepository(session).held(user_id)] == ["Likes tea"]


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
        (fact,) = await FactRepository(session).held(user_id)
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


async def test_facts_are_reinforced_reworded_flagged_and_superseded_in_one_list(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user_id, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["a", "b"])
    other_id, _ = await seed_conversation(sessions, start=clock.now(), texts=["x"], user_key="cli:bo")
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        assert (
            await add_facts(
                facts, user_id, conversation_id, ["Lives in Lisbon", "Is a nurse"], clock.now(), source="tool"
            )
            == 2
        )
        await add_facts(facts, other_id, None, ["Lives in Oslo"], clock.now(), source="tool")
    clock.advance(timedelta(minutes=5))
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        # Said again: one fact, reinforced.
        assert await add_facts(facts, user_id, None, ["lives in lisbon."], clock.now(), source="tool") == 0
        lisbon, nurse = await facts.held(user_id)
        assert (lisbon.reinforced, lisbon.last_seen_at) == (2, clock.now())
        assert await add_facts(facts, user_id, None, ["Lives in Porto"], clock.now(), source="tool") == 1
        porto = (await facts.held(user_id, newest_first=True))[0]
        assert await facts.supersede(user_id, [lisbon.id], by=porto.id, at=clock.now(), reason="moved") == 1
        assert await facts.set_flags(user_id, nurse.id, clock.now(), pinned=True, hidden=True) is not None
        # Another owner's id finds nothing, for every change.
        assert await facts.set_flags(other_id, nurse.id, clock.now(), pinned=False) is None
        assert await facts.reword(other_id, nurse.id, "Is a doctor", clock.now()) is None
        assert await facts.invalidate(other_id, [nurse.id], clock.now(), reason="x") == 0
        reworded = await facts.reword(user_id, nurse.id, "Works as a nurse at a hospital", clock.now())
        assert reworded is not None and reworded.id == nurse.id
    async with sessions() as session:
        facts = FactRepository(session)
        held = {f.content: f for f in await facts.held(user_id)}
        assert set(held) == {"Lives in Porto", "Works as a nurse at a hospital"}
        assert held["Works as a nurse at a hospital"].pinned and held["Works as a nurse at a hospital"].hidden
        assert [f.content for f in await facts.held(user_id, visible_only=True)] == ["Lives in Porto"]
        old = await session.get(UserFact, lisbon.id)
        assert old is not None and old.superseded_by == porto.id and old.invalidated_at == clock.now()
        assert [f.content for f in await facts.held(other_id)] == ["Lives in Oslo"]
        changed = await session.get(FactConsolidation, user_id)
        # Every change moves it strictly later, even at one instant.
        assert changed is not None and clock.now() < changed.changed_at < clock.now() + timedelta(seconds=1)


async def test_a_rerun_reinforces_nothing_and_a_taken_back_fact_is_not_learned_again(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user_id, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=["a", "b"])
    for _ in range(2):
        async with sessions() as session, session.begin():
            await FactRepository(session).add_sourced(
                user_id, conversation_id, [("Has a cat", [1])], clock.now(), source="extraction"
            )
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        (cat,) = await facts.held(user_id)
        assert cat.reinforced == 1
        assert await facts.invalidate(user_id, [cat.id], clock.now(), reason="no cat") == 1
        await facts.add_sourced(
            user_id, conversation_id, [("has a cat", [1, 2])], clock.now(), source="extraction"
        )
    async with sessions() as session:
        assert await FactRepository(session).held(user_id) == []


async def test_the_profiles_rows_a_plans_day_the_version_and_a_fact_held_again(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user_id, _ = await seed_conversation(sessions, start=clock.now(), texts=["a"])
    later = clock.now() + timedelta(days=1)
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        await facts.add_sourced(
            user_id,
            None,
            [("Has an exam on Monday", ()), ("Loves tea", ())],
            clock.now(),
            source="extraction",
            categories=["plan", "preference"],
            valid_until=[later, None],
        )
        before = await facts.version(user_id)
        exam, tea = await facts.held(user_id)
        assert await facts.invalidate(user_id, [tea.id], clock.now(), reason="no more tea") == 1
        assert await facts.version(user_id) != before
        assert [f.content for f in await facts.taken_back(user_id)] == ["Loves tea"]
        assert await facts.revive(user_id, [tea.id, exam.id], later) == 1  # the exam was held all along
    async with sessions() as session:
        facts = FactRepository(session)
        # id, content, category, pinned; said as often and as lately: the newest first.
        assert await facts.held_rows(user_id, in_effect_at=later) == [
            (tea.id, "Loves tea", "preference", False),
            (exam.id, "Has an exam on Monday", "plan", False),
        ]
        # A moment past the exam's date it is no longer in effect.
        after = later + timedelta(microseconds=1)
        assert await facts.held_rows(user_id, in_effect_at=after) == [
            (tea.id, "Loves tea", "preference", False)
        ]
        assert await facts.held_rows(user_id, learned_by=clock.now() - timedelta(seconds=1)) == []
        found = await facts.by_content(user_id, "loves tea.")
        assert found is not None and found.id == tea.id and found.invalidated_at is None
