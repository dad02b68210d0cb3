"""conversation_get: by message id, by day segment (its summary), or a range; never another user's."""

from __future__ import annotations

from datetime import date

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.errors import RecallInputError, RecallNotFoundError
from agent.search.get import MessagesOut, SummaryOut
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

pytestmark = pytest.mark.both_databases


async def test_shapes(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(search_get_max_messages=3), sessions, vectors=False)
    user = await add_user(sessions, "cli:gil")
    texts = ["one", "two", "three", "four", "five"]
    segment, ids = await add_day(sessions, user, date(2026, 2, 1), texts, summary="## Summary\nCounting.")
    one = await recall.get(user, message_id=ids[1])
    assert isinstance(one, MessagesOut)
    assert [(m.message_id, m.role, m.content) for m in one.messages] == [(ids[1], "assistant", "two")]
    summary = await recall.get(user, day_segment_id=segment)
    assert isinstance(summary, SummaryOut)
    assert summary.day_label == "2026-02-01" and summary.summary_markdown == "## Summary\nCounting."
    assert (summary.first_message_id, summary.last_message_id) == (ids[0], ids[-1])
    ranged = await recall.get(user, day_segment_id=segment, from_message_id=ids[1], to_message_id=ids[4])
    assert isinstance(ranged, MessagesOut)
    assert [m.content for m in ranged.messages] == ["two", "three", "four"] and ranged.truncated
    assert ranged.messages[0].created_at < ranged.messages[1].created_at


async def test_bad_shapes_and_other_users(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions, vectors=False)
    owner = await add_user(sessions, "cli:own")
    other = await add_user(sessions, "cli:oth")
    segment, ids = await add_day(sessions, owner, date(2026, 2, 1), ["secret plans", "ok"])
    with pytest.raises(RecallNotFoundError):
        await recall.get(other, message_id=ids[0])
    with pytest.raises(RecallNotFoundError):
        await recall.get(other, day_segment_id=segment)
    with pytest.raises(RecallNotFoundError):
        await recall.get(other, day_segment_id=segment, from_message_id=ids[0], to_message_id=ids[1])
    with pytest.raises(RecallInputError):
        await recall.get(owner)
    with pytest.raises(RecallInputError):
        await recall.get(owner, message_id=ids[0], day_segment_id=segment)
    with pytest.raises(RecallInputError):
        await recall.get(owner, day_segment_id=segment, from_message_id=ids[0])
    with pytest.raises(RecallInputError):
        await recall.get(owner, day_segment_id=segment, from_message_id=ids[1], to_message_id=ids[0])
