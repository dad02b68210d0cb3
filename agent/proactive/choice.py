"""A user's choice about follow-ups (/followups on|off, the button under each one)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import User
from db.repositories.touchpoints import TouchpointRepository


async def set_followups(
    sessions: async_sessionmaker[AsyncSession], user_id: int, enabled: bool, *, now: datetime
) -> int:
    """Record the choice; turning them off cancels every planned one. Returns how many were cancelled."""
    async with sessions() as session, session.begin():
        await session.execute(update(User).where(User.id == user_id).values(followups=enabled))
        if enabled:
            return 0
        return await TouchpointRepository(session).cancel_planned(user_id, outcome="opted_out", now=now)
