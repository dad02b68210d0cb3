"""Finding or creating the user behind a surface key (Telegram id, terminal name), with the rate
limit's verdict on the request in the same transaction (`admitted`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.ratelimit import RateLimiter, Scope, Verdict
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
    _, user, created = await admitted(
        sessions,
        None,
        None,
        identity="",
        key=key,
        now=now,
        timezone=timezone,
        name=name,
        telegram_id=telegram_id,
        onboarding_status=onboarding_status,
    )
    assert user is not None  # nothing refuses a request that is not limited
    return user, created


async def admitted(
    sessions: async_sessionmaker[AsyncSession],
    limiter: RateLimiter | None,
    scope: Scope | None,
    *,
    identity: str,
    key: str,
    now: datetime,
    timezone: str,
    name: str | None = None,
    telegram_id: int | None = None,
    onboarding_status: str = "complete",
    once_for: int | None = None,
) -> tuple[Verdict, User | None, bool]:
    """The rate limit's verdict on a request (`scope` None: not limited; `once_for`: the Telegram
    message it is, counted once however often it arrives here) and, when it is allowed, the person
    behind it, created on first contact (the flag says so): one transaction, the person read once. A
    refused request writes no user row."""
    for attempt in (1, 2):
        async with sessions() as session:
            try:
                async with session.begin():
                    verdict = (
                        await limiter.check_in(session, identity, now, scope, once_for=once_for)
                        if limiter is not None and scope is not None
                        else Verdict(True)
                    )
                    users = UserRepository(session)
                    user = await users.by_key(key) if verdict.allowed else None
                    created = verdict.allowed and user is None
                    if created:
                        user = await users.create(
                            key=key,
                            created_at=now,
                            timezone=timezone,
                            name=name,
                            telegram_id=telegram_id,
                            onboarding_status=onboarding_status,
                        )
            except IntegrityError:
                if attempt == 2:
                    raise
                continue  # two first messages raced; the other one created the user
        if limiter is not None and scope is not None:
            await limiter.settle(verdict, scope, now)
        return verdict, user, created
    raise AssertionError("unreachable")
