"""Finding or creating the user behind a surface key (Telegram id, terminal name)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import User
from db.repositories.users import UserRepository


async def get_or_create_user(
    sessions: async_sessionmaker[AsyncSession],
    *,
    key: str,
    now: datetime,
    timezone: str,
    name: str | None = None,
    telegram_id: int | None = None,
    onboarding_status: str = "complete",
) -> tuple[User, bool]:
    """Return the user with this key, creating it if needed; the flag says whether it is new."""
    async with sessions() as session:
        try:
            async with session.begin():
                existing = await UserRepository(session).by_key(key)
                if existing is not None:
                    return existing, False
                user = await UserRepository(session).create(
                    key=key,
                    created_at=now,
                    timezone=timezone,
                    name=name,
                    telegram_id=telegram_id,
                    onboarding_status=onboarding_status,
                )
            return user, True
        except IntegrityError:
            # Two first messages raced; the other one created the user.
            pass
    async with sessions() as session:
        user_or_none = await UserRepository(session).by_key(key)
        assert user_or_none is not None
        return user_or_none, False
