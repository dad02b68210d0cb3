"""A group chat's access, rate limits and token budget on both databases: the group decides, with
its own caps, counted under its own owner row and identity, apart from its members' private ones."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.access import AccessPolicy
from agent.account.groups import group_key, group_owner
from agent.account.ratelimit import Limit, RateLimiter, limits_from
from agent.core.settings import Settings
from agent.turn.daily_tokens import DailyCaps
from bench.clock import FrozenClock
from db.models import User
from db.repositories.usage import UsageRepository

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
ADMIN, ANA, MALLORY = 1, 42, 66
GROUP, OTHER_GROUP = -1001234567890, -1009999


def test_allowed_users_takes_group_chat_ids() -> None:
    settings = Settings(_env_file=None, allowed_users=f"42, {GROUP}, @ana")  # type: ignore[call-arg]
    assert settings.allowed_users == ["42", str(GROUP), "ana"]


async def test_under_the_allowlist_the_group_decides(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    access = AccessPolicy(
        sessions, mode="allowlist", allowed=[str(ANA), str(GROUP)], admins=[ADMIN], clock=clock
    )
    # An allowed group is answered whoever writes; a group not allowed is not, even for its members.
    assert await access.allows_group(GROUP, MALLORY, "mallory")
    assert await access.allows_group(GROUP, None, None)
    assert not await access.allows_group(OTHER_GROUP, ANA, None)
    assert not await access.allows_group(OTHER_GROUP, ADMIN, None)
    await access.set_rule(str(OTHER_GROUP), "allow", by=ADMIN)
    assert await access.allows_group(OTHER_GROUP, MALLORY, None)
    # A person denied by name stays denied inside an allowed group; a denied group is refused whole.
    await access.set_rule("mallory", "deny", by=ADMIN)
    assert not await access.allows_group(GROUP, MALLORY, "Mallory")
    await access.set_rule(str(GROUP), "deny", by=ADMIN)
    assert not await access.allows_group(GROUP, ANA, None)
    assert await access.allows(ANA, None)  # the member's private chat is not the group's


async def test_in_open_mode_only_a_denied_group_is_refused(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    access = AccessPolicy(sessions, mode="open", allowed=[], admins=[ADMIN], clock=clock)
    assert await access.allows_group(GROUP, ANA, None)
    await access.set_rule(str(GROUP), "deny", by=ADMIN)
    assert not await access.allows_group(GROUP, ADMIN, None)


async def test_a_group_over_its_minute_gets_one_note_and_its_members_are_not_slowed(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    settings = Settings(_env_file=None, group_rate_limit_per_minute=3)  # type: ignore[call-arg]
    limits = RateLimiter(sessions, limits=limits_from(settings), key=b"k")
    assert limits.limits["group"] == Limit(3, settings.group_rate_limit_per_day)
    chat = group_key(GROUP)
    verdicts = [await limits.check(chat, NOW + timedelta(seconds=i), "group") for i in range(8)]
    assert [v.allowed for v in verdicts] == [True] * 3 + [False] * 5
    assert [v.tell for v in verdicts[3:]] == [True, False, False, False, False]
    assert "a lot at once" in verdicts[3].message
    assert (await limits.check(f"telegram:{ANA}", NOW + timedelta(seconds=9))).allowed
    assert (await limits.check(group_key(OTHER_GROUP), NOW + timedelta(seconds=9), "group")).allowed
    assert (await limits.check(group_key(GROUP), NOW + timedelta(seconds=61), "group")).allowed


async def test_a_group_over_its_daily_tokens_is_stopped_by_its_own_cap(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    group, _ = await group_owner(sessions, chat_id=GROUP, title="Book club", now=NOW, timezone="UTC")
    async with sessions() as session, session.begin():
        person = User(key=f"telegram:{ANA}", telegram_id=ANA, created_at=NOW, timezone="UTC")
        session.add(person)
        await session.flush()
        usage = UsageRepository(session)
        await usage.add(group.id, NOW.date(), "chat", calls=4, input_tokens=900, output_tokens=100)
        await usage.add(person.id, NOW.date(), "chat", calls=1, input_tokens=300, output_tokens=0)
    caps = DailyCaps(per_user=500, per_group=1000)
    assert await caps.over(sessions, group.id, NOW) == "group"
    assert await caps.over(sessions, person.id, NOW) is None  # the group's tokens are not hers
    assert await DailyCaps(per_user=500, per_group=1001).over(sessions, group.id, NOW) is None
    # The person's cap never applies to a group, nor the group's to a person.
    assert await DailyCaps(per_user=300, per_group=0).over(sessions, group.id, NOW) is None
    assert await DailyCaps(per_user=300, per_group=0).over(sessions, person.id, NOW) == "user"
