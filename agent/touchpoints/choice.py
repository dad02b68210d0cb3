"""A user's choice about touchpoints (/followups on|off, the button under each one); their own
reminders are not part of it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import User
from db.repositories.touchpoints import TouchpointRepository


async def allow_touchpoints(
    sessions: async_sessionmaker[AsyncSession], user_id: int, allowed: bool, *, now: datetime
) -> int:
    """Record the choice; turning them off cancels every planned one. Returns how many were cancelled."""
    async with sessions() as session, session.begin():
        await session.execute(update(User).where(User.id == user_id).values(followups=allowed))
        if allowed:
            return 0
        return await TouchpointRepository(session).cancel_planned(user_id, outcome="opted_out", now=now)
