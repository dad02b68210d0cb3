"""The admin reports and groups: /stats counts people and groups apart (a group's memory is a `users`
row too), counts a group's budget refusals, and /user and /prompt read a group by its chat id."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.reports.texts import prompt_report, stats_report, user_report
from agent.turn.daily_tokens import DailyCaps, count_refusal
from bench.clock import FrozenClock
from db.models import User
from db.repositories.usage import UsageRepository

pytestmark = pytest.mark.both_databases

ANA, BOB, CAT = 31, 32, 33
PICNIC, QUIET = -1001234, -4002


def line(report: str, start: str) -> str:
    """The report's line that starts with `start`."""
    return next(x for x in report.splitlines() if x.startswith(start))


async def test_stats_counts_people_and_groups_apart_with_the_groups_budget_refusals(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    now = clock.now()
    people = {}
    for telegram_id, name in ((ANA, "Ana"), (BOB, "Bob"), (CAT, "Cat")):
        people[telegram_id], _ = await get_or_create_user(
            sessions,
            key=f"telegram:{telegram_id}",
            now=now,
            timezone="UTC",
            name=name,
            telegram_id=telegram_id,
        )
    picnic, _ = await group_owner(sessions, chat_id=PICNIC, title="Picnic", now=now, timezone="UTC")
    await group_owner(sessions, chat_id=QUIET, title="Quiet", now=now, timezone="UTC")
    async with sessions() as session, session.begin():
        # Ana wrote an hour ago, Bob three days ago, Cat never; the picnic group talked today.
        for owner, at in (
            (people[ANA].id, now - timedelta(hours=1)),
            (people[BOB].id, now - timedelta(days=3)),
        ):
            await session.execute(update(User).where(User.id == owner).values(last_message_at=at))
        await session.execute(update(User).where(User.id == picnic.id).values(last_message_at=now))
        await UsageRepository(session).add(
            picnic.id, now.date(), "chat", calls=1, input_tokens=900, output_tokens=100
        )
    # The picnic group is over a cap of 1,000 tokens a day; Ana, who spent nothing, is not.
    caps = DailyCaps(per_user=1_000, per_group=1_000)
    over = await caps.over(sessions, picnic.id, now)
    assert over == "group" and await caps.over(sessions, people[ANA].id, now) is None
    async with sessions() as session, session.begin():
        await count_refusal(session, over, now)

    stats = await stats_report(sessions, now, queue_depth=0, failures=0)
    assert line(stats, "users: ") == "users: 3 people, 2 groups"
    assert line(stats, "active in the last 24 h: ") == "active in the last 24 h: 1 person, 1 group"
    assert line(stats, "budget refusals today (UTC): ") == (
        "budget refusals today (UTC): 0 over USER_DAILY_TOKENS, 1 over GROUP_DAILY_TOKENS, "
        "0 over DAILY_TOKENS"
    )


async def test_user_and_prompt_read_a_group_by_its_chat_id_and_a_person_by_their_id(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    now = clock.now()
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA}", now=now, timezone="UTC", name="Ana", telegram_id=ANA
    )
    picnic, _ = await group_owner(sessions, chat_id=PICNIC, title="Picnic", now=now, timezone="UTC")
    async with sessions() as session, session.begin():
        await UsageRepository(session).add(
            picnic.id, now.date(), "chat", calls=2, input_tokens=900, output_tokens=100
        )

    group = await user_report(sessions, PICNIC, now)
    assert group.splitlines()[:2] == [f"group {picnic.id} (chat {PICNIC}): Picnic", "time zone: UTC"]
    assert f"{now.date().isoformat()}: 2 calls" in group and "onboarding" not in group
    person = await user_report(sessions, ANA, now)
    assert (
        person.startswith(f"user {ana.id} (telegram {ANA}): Ana")
        and "model use in the last 7 days: none" in person
    )
    # A chat id is never taken for a person's id, nor the other way round.
    assert await user_report(sessions, -ANA, now) == f"No user or group with Telegram id {-ANA}."
    assert await prompt_report(sessions, PICNIC) == f"No turn recorded yet for Telegram id {PICNIC}."
    assert await prompt_report(sessions, QUIET) == f"No user or group with Telegram id {QUIET}."
