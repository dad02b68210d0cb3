"""The one rule for where a conversation ends, used by the turn and by the conversation-detection job."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from db.models import TOUCHPOINT_KIND
from db.repositories.conversations import ConversationRepository


def conversation_expired(last_message_at: datetime, at: datetime, timeout: timedelta) -> bool:
    """True when `at` comes more than `timeout` after the conversation's last message."""
    return at - last_message_at > timeout


def conversation_timeout_for(kind: str, timeout: timedelta, reply_window: timedelta | None) -> timedelta:
    """A conversation the bot opened by writing first waits `reply_window` for an answer; others `timeout`."""
    return reply_window if kind == TOUCHPOINT_KIND and reply_window is not None else timeout


async def close_idle_conversations(
    session: AsyncSession,
    now: datetime,
    idle_for: timedelta,
    *,
    user_id: int | None = None,
    reply_window: timedelta | None = None,
) -> list[int]:
    """Close every active conversation idle for longer than `idle_for` at `now` (caller commits); one the
    bot opened by writing first, once unanswered for longer than `reply_window`."""
    return await ConversationRepository(session).end_idle_and_queue(
        now - idle_for,
        user_id=user_id,
        unanswered_before=now - reply_window if reply_window is not None else None,
    )
