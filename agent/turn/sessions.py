"""The one rule for where a session ends, used by the turn and by the session-detection job."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from db.repositories import ConversationRepository


def session_expired(last_message_at: datetime, at: datetime, timeout: timedelta) -> bool:
    """True when `at` comes more than `timeout` after the session's last message."""
    return at - last_message_at > timeout


async def close_idle_sessions(
    session: AsyncSession, now: datetime, idle_for: timedelta, *, user_id: int | None = None
) -> list[int]:
    """Close every active session idle for longer than `idle_for` at `now` (caller commits)."""
    return await ConversationRepository(session).end_idle_and_queue(now - idle_for, user_id=user_id)
