"""The turn's writes through statements built once: the history appended or replaced, a message stored."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import Conversation, TranscriptMessage, User
from db.repositories.conversations import ConversationRepository
from db.repositories.transcript import TranscriptRepository

pytestmark = pytest.mark.both_databases

AT = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def _message(n: int) -> dict[str, Any]:
    return {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": f"message {n}"}]}


async def _conversation(sessions: async_sessionmaker[AsyncSession]) -> tuple[int, int]:
    async with sessions() as session, session.begin():
        user = User(key="cli:writes", created_at=AT, timezone="UTC")
        session.add(user)
        await session.flush()
        conversation = await ConversationRepository(session).start(user.id, AT)
        return user.id, conversation.id


async def _stored(sessions: async_sessionmaker[AsyncSession], conversation_id: int) -> tuple[list[Any], int]:
    async with sessions() as session:
        conversation = await session.get(Conversation, conversation_id)
        assert conversation is not None
        return conversation.messages, conversation.message_count


async def test_turns_of_any_length_append_in_order_and_a_whole_history_replaces(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    _, conversation_id = await _conversation(sessions)
    counts = []
    for added in ([_message(0), _message(1)], [_message(2)], [_message(3), _message(4), _message(5)], []):
        async with sessions() as session, session.begin():
            counts.append(await ConversationRepository(session).append_turn(conversation_id, added))
    assert counts == [1, 2, 3, 4]
    assert await _stored(sessions, conversation_id) == ([_message(n) for n in range(6)], 4)

    async with sessions() as session, session.begin():
        count = await ConversationRepository(session).append_turn(
            conversation_id, [_message(9)], whole=[_message(7), _message(9)]
        )
    assert count == 5
    assert await _stored(sessions, conversation_id) == ([_message(7), _message(9)], 5)


async def test_a_forgotten_conversation_takes_no_turn(sessions: async_sessionmaker[AsyncSession]) -> None:
    async with sessions() as session, session.begin():
        assert await ConversationRepository(session).append_turn(10**9, [_message(0)]) is None


async def test_a_message_is_stored_after_the_pending_changes_and_stays_in_the_session(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    user_id, conversation_id = await _conversation(sessions)
    async with sessions() as session, session.begin():
        user = await session.get(User, user_id)
        assert user is not None
        user.name = "Ada"  # pending: flushed before the insert
        row = await TranscriptRepository(session).add(
            user_id=user_id, conversation_id=conversation_id, role="user", content="hello", sent_at=AT
        )
        assert user not in session.dirty
        row.speaker_name = "Ada L."  # the row is the session's: a change to it is stored too
    async with sessions() as session:
        stored = (await session.execute(select(TranscriptMessage))).scalar_one()
        named = await session.get(User, user_id)
    assert (stored.id, stored.content, stored.kind, stored.sent_at) == (row.id, "hello", "text", AT)
    assert stored.speaker_name == "Ada L."
    assert named is not None and named.name == "Ada"
