"""Storing a call on both databases: a closed voice conversation, once per call id, ready for the queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.memory.service import Facts
from agent.search.recall import Recall
from agent.turn.call_turn import SpokenTurn
from agent.turn.service import TurnService
from agent.voice.calls import EndedCall
from agent.voice.store import VoiceStore
from db.models import Conversation, DaySegment, TranscriptMessage, User, UserFact
from db.repositories.conversations import ConversationRepository
from db.repositories.transcript import TranscriptRepository
from jobs.queue import claim_and_read

pytestmark = pytest.mark.both_databases

# 23:58 in Lisbon (UTC+0 in March) would not cross midnight; Tokyo is UTC+9, so 14:58 UTC is 23:58 there.
START = datetime(2026, 3, 3, 14, 58, tzinfo=UTC)


def call(call_id: str = "conv_a", *, start: datetime = START, texts: tuple[str, ...] = ()) -> EndedCall:
    said = texts or (
        "Hi Ana!",
        "I finally booked the Porto trip",
        "When do you leave?",
        "Right after midnight",
    )
    turns = tuple(
        SpokenTurn("assistant" if i % 2 == 0 else "user", text, start + timedelta(seconds=50 * i))
        for i, text in enumerate(said)
    )
    return EndedCall(
        call_id=call_id,
        started_at=start,
        ended_at=turns[-1].at + timedelta(seconds=5),
        turns=turns,
        token="token",
        token_id="session",
    )


@pytest.fixture
async def store(engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[VoiceStore]:
    settings = Settings(_env_file=None, database_url=str(engine.url), model="test")  # type: ignore[call-arg]
    recall = Recall(settings=settings, sessions=sessions, dialect=engine.dialect.name, embedder=None)
    facts = Facts.over(settings, recall)
    turns = TurnService(settings=settings, engine=engine, sessions=sessions, recall=recall, facts=facts)
    yield VoiceStore(sessions=sessions, facts=facts, turns=turns)
    await turns.close()


async def user_in(sessions: async_sessionmaker[AsyncSession], timezone: str, key: str = "cli:ana") -> int:
    user, _ = await get_or_create_user(sessions, key=key, now=START, timezone=timezone, name="Ana")
    return user.id


async def test_a_call_becomes_a_closed_voice_conversation_in_the_days_it_touched(
    store: VoiceStore, sessions: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await user_in(sessions, "Asia/Tokyo")
    stored = await store.store_call(user_id, call())
    assert stored is not None and (stored.messages, stored.duplicate) == (4, False)
    async with sessions() as session:
        conversation = await session.get(Conversation, stored.conversation_id)
        assert conversation is not None
        assert (conversation.kind, conversation.call_id, conversation.status) == ("voice", "conv_a", "closed")
        assert conversation.started_at == START and conversation.message_count == 4
        rows = await TranscriptRepository(session).for_conversation(conversation.id)
        days = {d.id: d for d in (await session.execute(select(DaySegment))).scalars()}
        user_last = await session.scalar(select(User.last_message_at).where(User.id == user_id))
    assert [(r.role, r.kind, r.sent_at) for r in rows] == [
        ("assistant", "voice", START),
        ("user", "voice", START + timedelta(seconds=50)),
        ("assistant", "voice", START + timedelta(seconds=100)),
        ("user", "voice", START + timedelta(seconds=150)),
    ]
    # 23:58 to 00:00:30 in Tokyo: two local days, each counting its own turns.
    assert sorted((str(days[r.day_segment_id].day), r.content) for r in rows)[0][0] == "2026-03-03"
    assert {str(d.day): d.message_count for d in days.values()} == {"2026-03-03": 3, "2026-03-04": 1}
    # The call is the user's latest contact ("time since last contact", the next turn's time tier).
    assert user_last == START + timedelta(seconds=150)
    # The queue claims it like any ended session.
    claimed = await claim_and_read(
        sessions,
        "w",
        START + timedelta(minutes=5),
        timedelta(minutes=15),
        lambda s, i: s.get(Conversation, i),
    )
    assert claimed is not None and claimed[0] == conversation.id and claimed[1].status == "processing"


async def test_the_same_call_delivered_again_or_at_once_is_stored_once(
    store: VoiceStore, sessions: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await user_in(sessions, "UTC")
    first, again = await asyncio.gather(store.store_call(user_id, call()), store.store_call(user_id, call()))
    later = await store.store_call(user_id, call())
    assert first is not None and again is not None and later is not None
    assert {first.conversation_id, again.conversation_id, later.conversation_id} == {first.conversation_id}
    assert sorted([first.duplicate, again.duplicate, later.duplicate]) == [False, True, True]
    async with sessions() as session:
        assert await session.scalar(select(func.count()).select_from(Conversation)) == 1
        assert await session.scalar(select(func.count()).select_from(TranscriptMessage)) == 4
    # The database itself refuses a second conversation with the same call id.
    with pytest.raises(IntegrityError):
        async with sessions() as session, session.begin():
            session.add(
                Conversation(
                    user_id=user_id,
                    kind="voice",
                    call_id="conv_a",
                    status="closed",
                    started_at=START,
                    last_message_at=START,
                    messages=[],
                    message_count=0,
                )
            )


async def test_a_call_ends_the_text_conversation_it_interrupts_but_not_one_that_went_on_during_it(
    store: VoiceStore, sessions: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await user_in(sessions, "UTC")
    async with sessions() as session, session.begin():
        texting = await ConversationRepository(session).start(user_id, START - timedelta(minutes=3))
    stored = await store.store_call(user_id, call())
    assert stored is not None and stored.closed_text_conversation_id == texting.id
    async with sessions() as session, session.begin():
        again = await ConversationRepository(session).start(user_id, START + timedelta(seconds=20))
    stored = await store.store_call(user_id, call("conv_b"))
    assert stored is not None and stored.closed_text_conversation_id is None
    async with sessions() as session:
        statuses = {c.id: c.status for c in (await session.execute(select(Conversation))).scalars()}
    assert statuses[texting.id] == "closed" and statuses[again.id] == "active"


async def test_a_forgotten_user_takes_no_call_and_no_fact(
    store: VoiceStore, sessions: async_sessionmaker[AsyncSession]
) -> None:
    assert await store.store_call(12345, call()) is None
    assert await store.add_fact(12345, "Likes tea", "preference", START) is None
    user_id = await user_in(sessions, "UTC")
    added = await store.add_fact(user_id, "Likes tea", "preference", START)
    assert added is not None and added.created
    async with sessions() as session:
        facts = (await session.execute(select(UserFact))).scalars().all()
        assert await session.scalar(select(func.count()).select_from(Conversation)) == 0
    assert [(f.content, f.source, f.category) for f in facts] == [("Likes tea", "voice", "preference")]
