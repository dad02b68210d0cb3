"""Rate limits: a sliding minute in memory, a rolling day from the stored messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.users import get_or_create_user
from bot.ratelimit import RateLimiter
from db.models import TranscriptMessage

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


async def test_minute_window_slides(sessions: async_sessionmaker[AsyncSession]) -> None:
    limiter = RateLimiter(sessions, per_minute=2, per_day=100)
    assert (await limiter.check(1, NOW)).allowed
    assert (await limiter.check(1, NOW + timedelta(seconds=10))).allowed
    refused = await limiter.check(1, NOW + timedelta(seconds=20))
    assert not refused.allowed and refused.limit == "minute" and refused.message
    assert (await limiter.check(2, NOW + timedelta(seconds=20))).allowed  # other users are unaffected
    assert (await limiter.check(1, NOW + timedelta(seconds=61))).allowed


async def test_day_limit_counts_stored_messages(sessions: async_sessionmaker[AsyncSession]) -> None:
    user, _ = await get_or_create_user(sessions, key="t:1", now=NOW, timezone="UTC")
    async with sessions() as session, session.begin():
        for i in range(3):
            session.add(
                TranscriptMessage(user_id=user.id, role="user", content="x", sent_at=NOW - timedelta(hours=i))
            )
        session.add(
            TranscriptMessage(user_id=user.id, role="user", content="old", sent_at=NOW - timedelta(days=2))
        )
    limiter = RateLimiter(sessions, per_minute=100, per_day=3)
    verdict = await limiter.check(user.id, NOW)
    assert not verdict.allowed and verdict.limit == "day"
    # A fresh process (new limiter) sees the same count: it lives in the database.
    assert await RateLimiter(sessions, per_minute=100, per_day=4).check(user.id, NOW) == verdict.__class__(
        True
    )
