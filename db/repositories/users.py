"""Users: look them up, create them, and check one still exists before writing; the caller commits."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import User


async def user_present(session: AsyncSession, user_id: int) -> bool:
    """Whether the user still exists, checked in the caller's transaction before it writes.

    On PostgreSQL the row is locked FOR KEY SHARE until that transaction ends, so a concurrent
    /forget's DELETE waits for it and then removes what it wrote too (SQLite has one writer at a
    time). User ids are never reused, so a missing row means forgotten for good.
    """
    stmt = select(User.id).where(User.id == user_id).with_for_update(read=True, key_share=True)
    return await session.scalar(stmt) is not None


class UserRepository:
    """Look up and create users."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, user_id: int) -> User | None:
        """A user by primary key."""
        return await self.session.get(User, user_id)

    async def by_key(self, key: str) -> User | None:
        """A user by their surface key ("telegram:42", "cli:alice")."""
        return (await self.session.execute(select(User).where(User.key == key))).scalar_one_or_none()

    async def by_telegram_id(self, telegram_id: int) -> User | None:
        """A user by Telegram id."""
        stmt = select(User).where(User.telegram_id == telegram_id)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def by_chat_id(self, chat_id: int) -> User | None:
        """A group by its Telegram chat id."""
        stmt = select(User).where(User.chat_id == chat_id)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def create(
        self,
        *,
        key: str,
        created_at: datetime,
        timezone: str,
        name: str | None = None,
        telegram_id: int | None = None,
        onboarding_status: str = "pending",
        kind: str = "person",
        chat_id: int | None = None,
    ) -> User:
        """Insert a new user (a person, or a group chat owning its memory) and flush to get its id."""
        user = User(
            key=key,
            telegram_id=telegram_id,
            kind=kind,
            chat_id=chat_id,
            name=name,
            timezone=timezone,
            onboarding_status=onboarding_status,
            profile={},
            created_at=created_at,
        )
        self.session.add(user)
        await self.session.flush()
        return user
