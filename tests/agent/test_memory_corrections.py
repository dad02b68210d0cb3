"""Taking back one memory through real turns: memory_forget and memory_correct end the facts they
name, memory_search and conversation_search's fact keys and vectors drop them at once, the transcript
stays, and post-processing does not learn them again from the old messages."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.memory.corrections import without_taken_back
from agent.memory.units import KIND_FACT_CHUNK, fact_digest
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from db.models import SearchChunk, TranscriptMessage, UserFact
from db.repositories.facts import FactRepository
from tests.agent.test_tools import ToolScript, make_service

pytestmark = pytest.mark.both_databases


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


async def test_forget_and_correct_one_fact_each(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    service, recall = make_service(settings, engine, sessions, clock, ToolScript([]))
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="Ana")
    other, _ = await get_or_create_user(sessions, key="cli:bea", now=clock.now(), timezone="UTC", name="Bea")
    told = await service.reply(
        Incoming(
            owner=user.id,
            text="I have a cat named Miso, I live in Lisbon and I love tea",
            sent_at=clock.now(),
        )
    )
    facts = [("Ana has a cat named Miso", [told.message_id]), ("Ana lives in Lisbon", [told.message_id])]
    async with sessions() as session, session.begin():
        await FactRepository(session).add_sourced(
            user.id, None, [*facts, ("Ana loves tea", [])], clock.now(), source="extraction"
        )
        await FactRepository(session).add_sourced(
            other.id, None, [("Bea has a cat", [])], clock.now(), source="tool"
        )
    await recall.index_user(user.id, now=clock.now())
    async with sessions() as session:
        taken = {
            fact_digest(f.id, f.content, [told.message_id])
            for f in await FactRepository(session).held(user.id)
            if f.content in dict(facts)
        }
        indexed = {
            d
            for (d,) in (
                await session.execute(select(SearchChunk.digest).where(SearchChunk.kind == KIND_FACT_CHUNK))
            ).all()
        }
        assert len(indexed) == 3 and taken <= indexed  # every fact Ana holds, sourced or not

    later = clock.now() + timedelta(minutes=5)
    forget = ToolScript([("memory_forget", {"fact": "has a cat", "reason": "it was wrong"})])
    service.model.function = forget  # type: ignore[attr-defined]
    await service.reply(Incoming(owner=user.id, text="I don't have a cat, forget that", sent_at=later))
    assert forget.returns == [{"forgotten": ["Ana has a cat named Miso"]}]  # Bea's cat is not hers to forget

    correct = ToolScript([("memory_correct", {"wrong": "lives in Lisbon", "correct": "Ana lives in Porto"})])
    service.model.function = correct  # type: ignore[attr-defined]
    await service.reply(
        Incoming(
            owner=user.id,
            text="That's wrong, I moved to Porto last year",
            sent_at=later + timedelta(minutes=1),
        )
    )
    assert (
        correct.returns[0]["forgotten"] == ["Ana lives in Lisbon"]
        and correct.returns[0]["saved"] == "Ana lives in Porto"
    )

    facts_of = service.facts
    assert facts_of is not None
    now = later + timedelta(minutes=2)
    assert [h.content for h in await facts_of.search(user.id, "cat", limit=5, now=now)] == []
    assert [h.content for h in await facts_of.search(user.id, "lives", limit=5, now=now)] == [
        "Ana lives in Porto"
    ]
    assert [h.content for h in await facts_of.search(other.id, "cat", limit=5, now=now)] == ["Bea has a cat"]
    async with sessions() as session:
        rows = (
            await session.execute(
                select(UserFact.content, UserFact.invalidated_at, UserFact.invalid_reason)
                .where(UserFact.user_id == user.id)
                .order_by(UserFact.id)
            )
        ).all()
        assert [tuple(r) for r in rows] == [
            ("Ana has a cat named Miso", later, "it was wrong"),
            ("Ana lives in Lisbon", later + timedelta(minutes=1), "corrected: Ana lives in Porto"),
            ("Ana loves tea", None, None),
            ("Ana lives in Porto", None, None),
        ]
        porto = await FactRepository(session).by_content(user.id, "Ana lives in Porto")
        lisbon = await FactRepository(session).by_content(user.id, "Ana lives in Lisbon")
        assert porto is not None and lisbon is not None and lisbon.superseded_by == porto.id
        # conversation_search's fact words and fact vectors hold neither; the transcript stays.
        known = await facts_of.units.known(session, user.id)
        assert [f.content for f in known.facts] == ["Ana lives in Porto", "Ana loves tea"]
        left = {
            d
            for (d,) in (
                await session.execute(select(SearchChunk.digest).where(SearchChunk.kind == KIND_FACT_CHUNK))
            ).all()
        }
        assert taken and not taken & left
        assert await session.scalar(
            select(TranscriptMessage.content).where(TranscriptMessage.id == told.message_id)
        )

        # Post-processing of the old messages does not learn them again; said again later, it does.
        again = await without_taken_back(
            session,
            user.id,
            [("Ana has a cat", [told.message_id]), ("Ana likes green tea", [told.message_id])],
            at=later,
        )
        assert again == [1]
    said_again = await service.reply(
        Incoming(
            owner=user.id, text="Plot twist: I adopted a cat named Miso", sent_at=later + timedelta(days=1)
        )
    )
    async with sessions() as session, session.begin():
        kept = await without_taken_back(
            session,
            user.id,
            [("Ana has a cat named Miso", [said_again.message_id])],
            at=later + timedelta(days=1),
        )
        assert kept == [0]
        assert (
            await session.scalar(
                select(UserFact.invalidated_at).where(UserFact.content == "Ana has a cat named Miso")
            )
            is None
        )  # held again
