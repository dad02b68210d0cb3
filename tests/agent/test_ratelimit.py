"""Rate limits per Telegram identity, in the database: sliding minute, rolling day, per scope; they
survive /forget, a restart and a second instance, and store no Telegram id."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.forget import forget_user
from agent.account.ratelimit import Limit, RateLimiter, hash_key
from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from db.engine import create_engine, session_factory
from db.models import RateLimitEvent
from db.repositories.access import AccessRepository

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
ANA, BO = "telegram:424242", "telegram:515151"


def limiter(sessions: async_sessionmaker[AsyncSession], *, minute: int = 100, day: int = 1000) -> RateLimiter:
    return RateLimiter(sessions, limits={"message": Limit(minute, day), "export": Limit(1, 2)}, key=b"k")


async def test_the_minute_window_slides(sessions: async_sessionmaker[AsyncSession]) -> None:
    limits = limiter(sessions, minute=2)
    assert (await limits.check(ANA, NOW)).allowed
    assert (await limits.check(ANA, NOW + timedelta(seconds=10))).allowed
    refused = await limits.check(ANA, NOW + timedelta(seconds=20))
    assert not refused.allowed and refused.window == "minute" and "a lot of messages" in refused.message
    assert (await limits.check(BO, NOW + timedelta(seconds=20))).allowed  # other people are unaffected
    assert (await limits.check(ANA, NOW + timedelta(seconds=61))).allowed


async def test_a_burst_is_told_once_per_window(sessions: async_sessionmaker[AsyncSession]) -> None:
    limits = limiter(sessions, minute=2, day=6)
    at = [NOW + timedelta(seconds=s) for s in range(10)]
    assert all([(await limits.check(ANA, at[0])).allowed, (await limits.check(ANA, at[1])).allowed])
    refusals = [await limits.check(ANA, t) for t in at[2:6]]
    assert [(r.allowed, r.window, r.tell) for r in refusals] == [(False, "minute", True)] + [
        (False, "minute", False)
    ] * 3
    # Bo's own first refusal is told: the marker is per person.
    for t in at[:2]:
        await limits.check(BO, t)
    assert (await limits.check(BO, at[2])).tell
    # A new minute, a new note; the day's limit has a note of its own, once.
    later = NOW + timedelta(minutes=2)
    assert [(await limits.check(ANA, later + timedelta(seconds=s))).allowed for s in range(2)] == [True, True]
    assert (await limits.check(ANA, later + timedelta(seconds=3))).tell
    evening = NOW + timedelta(minutes=10)
    assert (await limits.check(ANA, evening)).allowed and (await limits.check(ANA, evening)).allowed
    over_day = [await limits.check(ANA, evening + timedelta(minutes=m)) for m in (2, 4, 6)]
    assert [(r.window, r.tell) for r in over_day] == [("day", True), ("day", False), ("day", False)]


async def test_every_refusal_counts_in_the_days_counters(sessions: async_sessionmaker[AsyncSession]) -> None:
    limits = limiter(sessions, minute=1, day=3)
    assert (await limits.check(ANA, NOW)).allowed
    # Told or not, each refusal is one more in the day's bot-wide counter of its limit (the dashboard's).
    told = [(await limits.check(ANA, NOW + timedelta(seconds=s))).tell for s in (1, 2, 3)]
    assert told == [True, False, False]
    assert (await limits.check(ANA, NOW + timedelta(minutes=2))).allowed
    assert (await limits.check(ANA, NOW + timedelta(minutes=4))).allowed
    assert (await limits.check(ANA, NOW + timedelta(minutes=6))).window == "day"
    assert (await limits.check(BO, NOW, "export")).allowed
    assert (await limits.check(BO, NOW + timedelta(seconds=1), "export")).window == "minute"
    async with sessions() as session:
        counts = await AccessRepository(session).counts(NOW.date())
    assert {name: n for name, n in counts.items() if name.startswith("rate_")} == {
        "rate_message_minute": 3,
        "rate_message_day": 1,
        "rate_export_minute": 1,
    }


async def test_the_day_survives_forget_and_a_restart(sessions: async_sessionmaker[AsyncSession]) -> None:
    user, _ = await get_or_create_user(sessions, key=ANA, now=NOW, timezone="UTC")
    limits = limiter(sessions, day=3)
    for hours in (3, 2, 1):
        assert (await limits.check(ANA, NOW - timedelta(hours=hours))).allowed
    refused = await limits.check(ANA, NOW)
    assert not refused.allowed and refused.window == "day" and "tomorrow" in refused.message
    # /forget deletes the person's data, not what they cost: the next user row starts counted.
    await forget_user(sessions, user.id, now=NOW)
    await get_or_create_user(sessions, key=ANA, now=NOW, timezone="UTC")
    # A fresh process (a new limiter) reads the same count from the database.
    assert not (await limiter(sessions, day=3).check(ANA, NOW)).allowed
    # Rolling: 24 hours after the oldest counted request, one more is allowed.
    assert (await limiter(sessions, day=3).check(ANA, NOW + timedelta(hours=21, seconds=1))).allowed


async def test_a_message_checked_again_is_counted_once(sessions: async_sessionmaker[AsyncSession]) -> None:
    # Its inbox row runs again after a crash, before or after its turn stored it.
    limits = limiter(sessions, minute=2)
    first = [await limits.check(ANA, NOW, once_for=41) for _ in range(3)]
    assert [(v.allowed, v.again) for v in first] == [(True, False), (True, True), (True, True)]
    assert (await limits.check(ANA, NOW, once_for=42)).allowed  # the second of the minute, same second
    over = [await limits.check(ANA, NOW + timedelta(seconds=1), once_for=43) for _ in range(2)]
    # Its note is told again (the first may not have gone out), counted once.
    assert [(v.allowed, v.tell, v.again) for v in over] == [(False, True, False), (False, True, True)]
    assert (await limits.check(ANA, NOW + timedelta(seconds=2), once_for=44)).tell is False
    assert (await limits.check(ANA, NOW, once_for=41)).allowed  # counted before the limit was reached
    async with sessions() as session:
        scopes = sorted((await session.execute(select(RateLimitEvent.scope))).scalars().all())
        counts = await AccessRepository(session).counts(NOW.date())
    assert scopes == ["message"] * 2 + ["message!m"]
    assert counts == {"rate_message_minute": 2}


async def test_scopes_count_separately(sessions: async_sessionmaker[AsyncSession]) -> None:
    limits = limiter(sessions, minute=1)
    assert (await limits.check(ANA, NOW)).allowed
    assert (await limits.check(ANA, NOW, "export")).allowed
    refused = await limits.check(ANA, NOW + timedelta(seconds=1), "export")
    assert refused.scope == "export" and "export" in refused.message
    assert (await limits.check(ANA, NOW, "start")).allowed  # a scope without limits
    assert (await limits.check(ANA, NOW + timedelta(minutes=2), "export")).allowed
    assert not (await limits.check(ANA, NOW + timedelta(minutes=4), "export")).allowed  # 2 a day


async def test_only_a_keyed_hash_is_stored(sessions: async_sessionmaker[AsyncSession]) -> None:
    await limiter(sessions).check(ANA, NOW)
    async with sessions() as session:
        stored = (await session.execute(select(RateLimitEvent))).scalars().all()
    assert len(stored) == 1
    assert "424242" not in stored[0].subject and len(stored[0].subject) == 64
    other_key = RateLimiter(sessions, limits={}, key=b"another")
    assert other_key.subject(ANA) != stored[0].subject  # without the key the hash cannot be matched


def test_the_key_comes_from_the_settings_or_the_bot_token() -> None:
    explicit = Settings(_env_file=None, rate_limit_hash_key="s3cret", telegram_bot_token="1:A")
    from_token = Settings(_env_file=None, telegram_bot_token="1:A")
    other_token = Settings(_env_file=None, telegram_bot_token="2:B")
    assert hash_key(explicit) == b"s3cret"
    assert hash_key(from_token) != hash_key(other_token) and b"1:A" not in hash_key(from_token)


async def test_concurrent_requests_never_pass_the_limit(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    # The second limiter has its own engine (connections): a second instance on the same database.
    other_engine = create_engine(database_url)
    limiters = [limiter(sessions, minute=5), limiter(session_factory(other_engine), minute=5)]
    try:
        verdicts = await asyncio.gather(
            *(limiters[i % 2].check(ANA, NOW + timedelta(milliseconds=i)) for i in range(20))
        )
    finally:
        await other_engine.dispose()
    assert sum(v.allowed for v in verdicts) == 5
    # Fifteen refusals, across both instances, and one friendly note for them.
    assert sum(v.tell for v in verdicts if not v.allowed) == 1
    async with sessions() as session:
        scopes = sorted((await session.execute(select(RateLimitEvent.scope))).scalars().all())
    assert scopes == ["message"] * 5 + ["message!m"]
