"""Delivering reminders: the touchpoints job and real python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.reminders.schedule import parse_local
from agent.reminders.store import NewReminder, mark_done, move_to_zone, set_reminder, snooze
from agent.touchpoints.choice import allow_touchpoints
from bench.clock import FrozenClock
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.touchpoints import TelegramMessenger
from db.models import Reminder, Touchpoint, TranscriptMessage, User
from jobs.context import JobContext
from jobs.registry import run_job

pytestmark = pytest.mark.both_databases

TOKEN = "123:ABC"
# Friday 27 March 2026, 12:00 in Lisbon (WET, UTC+0); the clocks go forward on Sunday the 29th.
FRIDAY_NOON = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
async def delivery(ctx: JobContext, tg: FakeTelegram, clock: FrozenClock) -> AsyncIterator[JobContext]:
    """The job context with the bot's messenger on the fake; no chat model (a reminder needs none)."""
    clock.current = FRIDAY_NOON
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        ctx.messenger = TelegramMessenger(bot)
        yield ctx


async def _user(sessions: async_sessionmaker[AsyncSession], telegram_id: int, timezone: str) -> int:
    user, _ = await get_or_create_user(
        sessions, key=f"telegram:{telegram_id}", now=FRIDAY_NOON, timezone=timezone, telegram_id=telegram_id
    )
    return user.id


async def _set(
    ctx: JobContext, user_id: int, local: str, *, repeat: str = "once", text: str = "call mom"
) -> int:
    stored = await set_reminder(
        ctx.sessions,
        user_id,
        NewReminder(text, parse_local(local), repeat),  # type: ignore[arg-type]
        timezone="Europe/Lisbon",
        now=ctx.clock.now(),
        source_message_id=None,
        max_active=ctx.settings.reminders_max_active,
    )
    return stored.reminder.id


async def _occurrences(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[datetime, str]]:
    async with sessions() as session:
        rows = await session.execute(select(Touchpoint.due_at, Touchpoint.status).order_by(Touchpoint.id))
        return [(due, status) for due, status in rows.all()]


async def test_a_reminder_goes_out_at_its_minute_at_night_once_without_a_model(
    delivery: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tg: FakeTelegram
) -> None:
    user_id = await _user(sessions, 41, "Europe/Lisbon")
    reminder_id = await _set(delivery, user_id, "2026-03-27 23:30")
    # Follow-ups off does not touch what the user asked for.
    await allow_touchpoints(sessions, user_id, False, now=clock.now())

    clock.current = datetime(2026, 3, 27, 23, 29, 59, tzinfo=UTC)
    assert await run_job("touchpoints", delivery) == {"due": 0}
    clock.current = datetime(2026, 3, 27, 23, 30, 20, tzinfo=UTC)  # quiet hours: reminders go anyway
    assert await run_job("touchpoints", delivery) == {"due": 1, "sent": 1}
    assert await run_job("touchpoints", delivery) == {"due": 0}

    (sent,) = tg.messages_to(41)
    assert sent.text == "⏰ call mom"
    assert f"reminder:done:{reminder_id}" in json.dumps(sent.params.get("reply_markup"))
    async with sessions() as session:
        message = await session.scalar(select(TranscriptMessage).where(TranscriptMessage.user_id == user_id))
        assert message is not None and (message.role, message.kind, message.content) == (
            "assistant",
            "reminder",
            sent.text,
        )
        reminder = await session.get(Reminder, reminder_id)
        assert reminder is not None and (reminder.status, reminder.sent_count) == ("done", 1)


async def test_a_daily_reminder_keeps_nine_local_across_daylight_saving(
    delivery: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tg: FakeTelegram
) -> None:
    user_id = await _user(sessions, 42, "Europe/Lisbon")
    await _set(delivery, user_id, "2026-03-28 09:00", repeat="daily", text="pills")
    saturday, sunday = datetime(2026, 3, 28, 9, 0, tzinfo=UTC), datetime(2026, 3, 29, 8, 0, tzinfo=UTC)
    for at in (saturday, sunday):
        clock.current = at
        assert await run_job("touchpoints", delivery) == {"due": 1, "sent": 1}
    assert [m.text for m in tg.messages_to(42)] == ["⏰ pills", "⏰ pills"]
    monday = datetime(2026, 3, 30, 8, 0, tzinfo=UTC)  # 09:00 WEST
    assert await _occurrences(sessions) == [(saturday, "sent"), (sunday, "sent"), (monday, "planned")]

    # A new zone keeps 09:00 local: Tokyo's 09:00 is midnight UTC.
    async with sessions() as session, session.begin():
        (await session.get(User, user_id)).timezone = "Asia/Tokyo"  # type: ignore[union-attr]
        assert await move_to_zone(session, user_id, "Asia/Tokyo") == 1
    assert (await _occurrences(sessions))[-1] == (datetime(2026, 3, 30, 0, 0, tzinfo=UTC), "planned")


async def test_snooze_brings_it_back_and_done_ends_it(
    delivery: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tg: FakeTelegram
) -> None:
    user_id = await _user(sessions, 43, "Europe/Lisbon")
    reminder_id = await _set(delivery, user_id, "2026-03-27 15:00")
    assert await _set(delivery, user_id, "2026-03-27 15:00") == reminder_id  # the same request: set once
    clock.current = datetime(2026, 3, 27, 15, 0, tzinfo=UTC)
    assert await run_job("touchpoints", delivery) == {"due": 1, "sent": 1}
    until = await snooze(sessions, user_id, reminder_id, "10m", timezone="Europe/Lisbon", now=clock.now())
    assert until == clock.now() + timedelta(minutes=10)
    clock.advance(timedelta(minutes=10))
    assert await run_job("touchpoints", delivery) == {"due": 1, "sent": 1}
    assert len(tg.messages_to(43)) == 2
    # Snoozed again, then done before it comes back: it does not come back.
    await snooze(sessions, user_id, reminder_id, "1h", timezone="Europe/Lisbon", now=clock.now())
    assert await mark_done(sessions, user_id, reminder_id, now=clock.now()) is not None
    clock.advance(timedelta(hours=1))
    assert await run_job("touchpoints", delivery) == {"due": 0}
    # Someone else's id is a missing one.
    other = await _user(sessions, 44, "UTC")
    assert await snooze(sessions, other, reminder_id, "1h", timezone="UTC", now=clock.now()) is None
    async with sessions() as session:
        reminder = await session.get(Reminder, reminder_id)
        assert reminder is not None and (reminder.status, reminder.snoozed_count) == ("done", 2)


async def test_a_blocked_user_gets_nothing_and_the_next_one_stays_planned(
    delivery: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tg: FakeTelegram
) -> None:
    user_id = await _user(sessions, 45, "Europe/Lisbon")
    await _set(delivery, user_id, "2026-03-27 18:00", repeat="daily")
    tg.fail_next("sendMessage", error_code=403, description="Forbidden: bot was blocked by the user")
    clock.current = datetime(2026, 3, 27, 18, 0, tzinfo=UTC)
    assert await run_job("touchpoints", delivery) == {"due": 1, "undeliverable": 1}
    async with sessions() as session:
        user = await session.get(User, user_id)
        assert user is not None and user.unreachable_at == clock.now()
        assert await session.scalar(select(TranscriptMessage.id)) is None  # nothing that never arrived
    assert [status for _, status in await _occurrences(sessions)] == ["undeliverable", "planned"]


async def test_the_daily_limit_applies(
    delivery: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tg: FakeTelegram
) -> None:
    delivery.settings = delivery.settings.model_copy(update={"reminders_per_day": 1})
    user_id = await _user(sessions, 46, "Europe/Lisbon")
    await _set(delivery, user_id, "2026-03-27 16:00", text="first")
    await _set(delivery, user_id, "2026-03-27 16:00", text="second")
    clock.current = datetime(2026, 3, 27, 16, 0, tzinfo=UTC)
    assert await run_job("touchpoints", delivery) == {"due": 2, "sent": 1, "cancelled_daily_limit": 1}
    # The two are worked side by side; the user's row lock lets one through.
    (sent,) = tg.messages_to(46)
    assert sent.text in ("⏰ first", "⏰ second")


async def test_a_groups_reminder_goes_to_the_group_and_a_members_to_the_member(
    delivery: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tg: FakeTelegram
) -> None:
    member = await _user(sessions, 43, "Europe/Lisbon")
    group, _ = await group_owner(sessions, chat_id=-100_777, title="Picnic", now=FRIDAY_NOON, timezone="UTC")
    await _set(delivery, group.id, "2026-03-27 13:00", text="bring the blanket")
    await _set(delivery, member, "2026-03-27 13:00", text="call the dentist")

    clock.current = FRIDAY_NOON + timedelta(hours=1, seconds=5)
    assert await run_job("touchpoints", delivery) == {"due": 2, "sent": 2}
    # The group's row has no Telegram user id: its reminder goes to the group's chat, nowhere else.
    assert [m.text for m in tg.messages_to(-100_777)] == ["⏰ bring the blanket"]
    assert [m.text for m in tg.messages_to(43)] == ["⏰ call the dentist"]
