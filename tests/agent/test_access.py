"""Access rules, the daily counters and the token budgets on both databases; ALLOWED_USERS parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.access import REFRESH, AccessPolicy
from agent.core.settings import Settings
from agent.turn.daily_tokens import DailyCaps
from bench.clock import FrozenClock
from db.models import User
from db.repositories.access import AccessRepository
from db.repositories.usage import UsageRepository

pytestmark = pytest.mark.both_databases

ADMIN = 1


def policy(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, **options: Any) -> AccessPolicy:
    values: dict[str, Any] = {"mode": "allowlist", "allowed": ["42", "alice"], "admins": [ADMIN]}
    values.update(options)
    return AccessPolicy(sessions, clock=clock, **values)


def test_allowed_users_accepts_ids_and_usernames_in_any_case() -> None:
    settings = Settings(_env_file=None, allowed_users="42, @Alice  bob_smith,7")  # type: ignore[call-arg]
    assert settings.allowed_users == ["42", "alice", "bob_smith", "7"]
    with pytest.raises(ValidationError, match="neither a Telegram id nor a @username"):
        Settings(_env_file=None, allowed_users="42, @no way")  # type: ignore[call-arg]


async def test_the_allowlist_by_id_username_rule_and_admin(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    access = policy(sessions, clock)
    assert await access.allows(42, None)
    assert await access.allows(5, "ALICE")
    assert await access.allows(ADMIN, None)
    assert not await access.allows(66, "mallory")
    await access.set_rule("66", "allow", by=ADMIN)
    assert await access.allows(66, "mallory")
    # A denial by either name wins over an allowance by the other, and over ALLOWED_USERS.
    await access.set_rule("mallory", "deny", by=ADMIN)
    assert not await access.allows(66, "Mallory")
    await access.set_rule("42", "deny", by=ADMIN)
    assert not await access.allows(42, None)
    await access.set_rule(str(ADMIN), "deny", by=ADMIN)
    assert await access.allows(ADMIN, None)
    listing = await access.listing()
    assert listing.rules == {"66": "allow", "mallory": "deny", "42": "deny", "1": "deny"}


async def test_deny_holds_in_open_mode(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    access = policy(sessions, clock, mode="open", allowed=[])
    assert await access.allows(66, None)
    await access.set_rule("66", "deny", by=ADMIN)
    assert not await access.allows(66, None)
    await access.set_rule("66", "allow", by=ADMIN)
    assert await access.allows(66, None)


async def test_another_instance_follows_a_change_within_the_refresh(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    here, there = policy(sessions, clock), policy(sessions, clock)
    assert not await there.allows(66, None)  # read and cached
    await here.set_rule("66", "allow", by=ADMIN)
    assert await here.allows(66, None)
    assert not await there.allows(66, None)  # its copy is younger than REFRESH
    clock.advance(REFRESH)
    assert await there.allows(66, None)


async def test_daily_counters_add_up_per_day(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    day = clock.now().date()
    async with sessions() as session, session.begin():
        repo = AccessRepository(session)
        for _ in range(3):
            await repo.bump(day, "refused_updates")
        await repo.bump(day, "refused_strangers", by=2)
        await repo.bump(day + timedelta(days=1), "refused_updates")
    async with sessions() as session:
        counts = await AccessRepository(session).counts(day)
    assert counts == {"refused_updates": 3, "refused_strangers": 2}


async def _user(sessions: async_sessionmaker[AsyncSession], key: str, now: datetime) -> int:
    async with sessions() as session, session.begin():
        user = User(key=key, created_at=now, timezone="UTC")
        session.add(user)
        await session.flush()
        return user.id


async def test_budgets_sum_every_kind_of_the_utc_day(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    now = clock.now()
    alice, bob = await _user(sessions, "cli:alice", now), await _user(sessions, "cli:bob", now)
    async with sessions() as session, session.begin():
        usage = UsageRepository(session)
        await usage.add(alice, now.date(), "chat", calls=1, input_tokens=600, output_tokens=100)
        await usage.add(alice, now.date(), "graph", calls=3, input_tokens=250, output_tokens=50)
        await usage.add(bob, now.date(), "chat", calls=1, input_tokens=300, output_tokens=0)
        await usage.add(
            alice, now.date() - timedelta(days=1), "chat", calls=1, input_tokens=9999, output_tokens=0
        )
    async with sessions() as session:
        usage = UsageRepository(session)
        assert await usage.spent(now.date(), alice) == (1300, 1000)
        assert await usage.spent(now.date()) == (1300, 0)
    assert await DailyCaps(per_user=1000).over(sessions, alice, now) == "user"
    assert await DailyCaps(per_user=1001).over(sessions, alice, now) is None
    assert await DailyCaps(per_user=1000).over(sessions, bob, now) is None
    assert await DailyCaps(bot_wide=1300).over(sessions, bob, now) == "bot"
    assert await DailyCaps(per_user=5000, bot_wide=1300).over(sessions, alice, now) == "bot"
    # The next UTC day starts from nothing.
    tomorrow = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    assert await DailyCaps(per_user=1, bot_wide=1).over(sessions, alice, tomorrow) is None
