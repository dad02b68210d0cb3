"""A finished voice call as one of `TurnService`'s turns: serialised with the user's other turns in
this process, stored once by its call id, and written only when the surface's check lets it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.turn.call_turn import FinishedCall, SpokenTurn, StoredCall
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from db.models import Conversation, TranscriptMessage, User

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
CALL = FinishedCall(
    call_id="conv_1",
    started_at=NOW + timedelta(minutes=1),
    ended_at=NOW + timedelta(minutes=2),
    turns=(
        SpokenTurn("assistant", "Hi!", NOW + timedelta(minutes=1)),
        SpokenTurn("user", "Calling instead", NOW + timedelta(minutes=1, seconds=10)),
    ),
)


@pytest.fixture
async def turns(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]
) -> AsyncIterator[TurnService]:
    settings = Settings(database_url=database_url, model="test", _env_file=None)  # type: ignore[call-arg]
    service = TurnService(settings=settings, engine=engine, sessions=sessions)
    yield service
    await service.close()


async def user_in(sessions: async_sessionmaker[AsyncSession]) -> int:
    user, _ = await get_or_create_user(sessions, key="t:1", now=NOW, timezone="UTC")
    return user.id


async def anyone(session: AsyncSession, user_id: int) -> User | None:
    return await session.get(User, user_id)


async def voice_rows(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[str, str]]:
    async with sessions() as session:
        found = await session.execute(
            select(TranscriptMessage.role, TranscriptMessage.content)
            .where(TranscriptMessage.kind == "voice")
            .order_by(TranscriptMessage.id)
        )
    return [(role, content) for role, content in found.all()]


async def test_a_call_waits_for_the_users_turn_and_is_stored_once(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await user_in(sessions)
    chat = await turns.reply(Incoming(owner=user_id, text="hello", sent_at=NOW, telegram_message_id=1))

    def store() -> asyncio.Task[StoredCall | None]:
        return asyncio.create_task(turns.store_call(user_id, CALL, may_write=anyone))

    async with turns.frame.serialised(user_id):
        waiting = store()
        await asyncio.sleep(0.3)
        assert not waiting.done() and await voice_rows(sessions) == []
    stored = await waiting
    again = await store()
    assert stored is not None and again is not None
    assert (stored.messages, stored.duplicate, again.duplicate) == (2, False, True)
    assert again.conversation_id == stored.conversation_id
    # The call ended the text conversation it interrupted.
    assert stored.closed_text_conversation_id == chat.conversation_id
    assert await voice_rows(sessions) == [("assistant", "Hi!"), ("user", "Calling instead")]
    async with sessions() as session:
        statuses = {c.kind: c.status for c in (await session.execute(select(Conversation))).scalars()}
    assert statuses == {"text": "closed", "voice": "closed"}


async def test_a_call_the_surface_may_not_write_stores_nothing(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await user_in(sessions)
    asked: list[int] = []

    async def refused(session: AsyncSession, user_id: int) -> User | None:
        asked.append(user_id)
        return None

    assert await turns.store_call(user_id, CALL, may_write=refused) is None
    assert asked == [user_id]
    assert await voice_rows(sessions) == []
    async with sessions() as session:
        assert (await session.execute(select(Conversation.id))).all() == []
