"""Check-ins (TOUCHPOINT_CHECK_IN_DAYS > 0): a user quiet that long gets one touchpoint on their best
open thread (the open-threads tier's ranking), planned due now; the delivery rules still apply.

One per quiet spell: a user with any touchpoint planned since their last message gets none.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.context.threads import ThreadRow, rank_threads
from agent.core.clock import local_day
from agent.core.settings import Settings
from db.models import ConversationThread, Touchpoint, User
from db.repositories.dedupe import dedupe_key
from db.repositories.threads import ThreadRepository
from db.repositories.touchpoints import REMINDER, NewTouchpoint, TouchpointRepository


async def plan_check_ins(
    sessions: async_sessionmaker[AsyncSession], settings: Settings, now: datetime, *, limit: int = 100
) -> int:
    """Plan a check-in for up to `limit` quiet users; how many were planned."""
    days = settings.touchpoint_check_in_days
    if days <= 0:
        return 0
    planned = 0
    async with sessions() as session, session.begin():
        for user in await _quiet_users(session, now - timedelta(days=days), limit):
            threads = await ThreadRepository(session).open_for(user.id)
            rows = [ThreadRow(t.id, t.type, t.content, t.created_at) for t in threads]
            best = rank_threads(rows, today=local_day(now, user.timezone), timezone=user.timezone, limit=1)
            if not best or user.last_message_at is None:
                continue
            thread = next(t for t in threads if t.id == best[0].row.id)
            plan = NewTouchpoint(
                thread.dedupe_key,
                thread.content,
                now,
                dedupe_key("check_in", user.last_message_at.isoformat()),
                kind="check_in",
            )
            planned += await TouchpointRepository(session).plan(user.id, None, user.timezone, [plan], at=now)
    return planned


async def _quiet_users(session: AsyncSession, quiet_since: datetime, limit: int) -> list[User]:
    stmt = (
        select(User)
        .where(
            User.last_message_at < quiet_since,
            User.telegram_id.is_not(None),
            User.onboarding_status == "complete",
            User.unreachable_at.is_(None),
            User.followups.is_not(False),
            exists().where(ConversationThread.user_id == User.id, ConversationThread.status == "open"),
            ~exists().where(
                Touchpoint.user_id == User.id,
                Touchpoint.kind != REMINDER,
                Touchpoint.planned_at >= User.last_message_at,
            ),
        )
        .order_by(User.last_message_at)
        .limit(limit)
    )
    return list((await session.execute(stmt)).scalars())
