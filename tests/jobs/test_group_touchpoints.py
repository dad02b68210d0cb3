"""Touchpoints and groups: a group's reminder goes to the group, a member's to them, nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.core.clock import FrozenClock
from agent.reminders.schedule import parse_local
from agent.reminders.store import NewReminder, set_reminder
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.touchpoints import TelegramSender
from db.models import Touchpoint
from db.repositories.touchpoints import NewTouchpoint, TouchpointRepository
from jobs.context import JobContext
from jobs.registry import run_job

pytestmark = pytest.mark.both_databases

TOKEN = "123:ABC"
NOON = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
GROUP_CHAT = -100_777
ANA = 7


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
async def delivery(ctx: JobContext, tg: FakeTelegram, clock: FrozenClock) -> AsyncIterator[JobContext]:
    clock.current = NOON
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        ctx.sender = TelegramSender(bot)
        yield ctx


async def _remind(ctx: JobContext, owner_id: int, text: str) -> None:
    await set_reminder(
        ctx.sessions,
        owner_id,
        NewReminder(text, parse_local("2026-03-27 13:00"), "once"),
        timezone="UTC",
        now=ctx.clock.now(),
        source_message_id=None,
        max_active=ctx.settings.reminders_max_active,
    )


async def test_a_groups_reminder_goes_to_the_group_and_a_members_to_the_member(
    delivery: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tg: FakeTelegram
) -> None:
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA}", now=NOON, timezone="UTC", name="Ana", telegram_id=ANA
    )
    group, _ = await group_owner(sessions, chat_id=GROUP_CHAT, title="Picnic", now=NOON, timezone="UTC")
    await _remind(delivery, group.id, "bring the blanket")
    await _remind(delivery, ana.id, "call the dentist")

    clock.current = NOON + timedelta(hours=1, seconds=5)
    assert await run_job("touchpoints", delivery) == {"due": 2, "sent": 2}

    assert [m.text for m in tg.messages_to(GROUP_CHAT)] == ["⏰ bring the blanket"]
    assert [m.text for m in tg.messages_to(ANA)] == ["⏰ call the dentist"]


async def test_no_follow_up_or_check_in_is_ever_planned_for_a_group(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA}", now=NOON, timezone="UTC", name="Ana", telegram_id=ANA
    )
    group, _ = await group_owner(sessions, chat_id=GROUP_CHAT, title="Picnic", now=NOON, timezone="UTC")
    plan = NewTouchpoint(None, "how did the picnic go?", NOON + timedelta(days=1), "k1")
    async with sessions() as session, session.begin():
        repo = TouchpointRepository(session)
        assert await repo.plan(group.id, None, "UTC", [plan], at=NOON) == 0
        assert await repo.plan(ana.id, None, "UTC", [plan], at=NOON) == 1
    async with sessions() as session:
        counted = select(Touchpoint.user_id, func.count()).group_by(Touchpoint.user_id)
        by_owner = dict((await session.execute(counted)).all())
    assert by_owner == {ana.id: 1}
