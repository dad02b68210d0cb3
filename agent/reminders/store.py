"""Reminders kept: set one, list, cancel, snooze, mark done, follow the user to a new time zone.

Every statement names the user: a reminder id of someone else looks exactly like a missing one.
Each occurrence is a `touchpoints` row of kind "reminder" whose key names the reminder and the local
time it stands for (`reminder:<id>:<local>`), or a snooze (`reminder:<id>:snooze:<n>`, or
`reminder:<id>:snooze:m<message id>` for a press of the snooze button under a message); the reminder's
`next_local` is the local time of its one planned regular occurrence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, cast

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import ensure_utc, zone_of
from agent.core.errors import ReminderRejectedError
from agent.reminders.schedule import (
    Repeat,
    exists,
    first_on_or_after,
    format_local,
    next_after,
    parse_local,
    repeated,
    to_utc,
)
from db.models import Reminder, Touchpoint
from db.repositories.dedupe import dedupe_key
from db.repositories.touchpoints import REMINDER

# Further ahead than this is a misreading (or not a reminder).
MAX_AHEAD = timedelta(days=366)
MAX_TEXT = 500
Snooze = Literal["10m", "1h", "tomorrow"]
SNOOZES: dict[str, timedelta] = {"10m": timedelta(minutes=10), "1h": timedelta(hours=1)}


@dataclass(frozen=True)
class NewReminder:
    """What the user asked for: the text and the first local time in their zone, and how it repeats."""

    text: str
    local: datetime
    repeat: Repeat = "once"
    days: Sequence[int] = ()


@dataclass(frozen=True)
class SetReminder:
    """The stored reminder and the first local time it goes off; `created` is False for a repeat."""

    reminder: Reminder
    first: datetime
    created: bool


def occurrence_key(reminder_id: int, local: datetime) -> str:
    """The touchpoint key of a regular occurrence."""
    return f"reminder:{reminder_id}:{format_local(local)}"


def is_snooze(key: str) -> bool:
    """True for a snoozed occurrence's touchpoint key."""
    return ":snooze:" in key


def _plan(session: AsyncSession, reminder: Reminder, due_at: datetime, key: str, now: datetime) -> None:
    session.add(
        Touchpoint(
            user_id=reminder.user_id,
            reminder_id=reminder.id,
            kind=REMINDER,
            reason=reminder.text,
            due_at=due_at,
            timezone=reminder.timezone,
            status="planned",
            dedupe_key=key,
            planned_at=now,
            attempts=0,
            chunks_sent=0,
        )
    )


def first_time(new: NewReminder, timezone: str, now: datetime) -> datetime:
    """The first local occurrence, checked: a real local time, in the future, within a year."""
    zone = zone_of(timezone)
    first = first_on_or_after(new.local, new.repeat, new.days)
    local_now = ensure_utc(now).astimezone(zone).replace(tzinfo=None)
    if not exists(first, zone):
        raise ReminderRejectedError(
            f"{format_local(first)} does not exist in {timezone} (the clocks jump that night); "
            "ask which time they mean"
        )
    if new.repeat == "once" and repeated(first, zone):
        raise ReminderRejectedError(
            f"{format_local(first)} happens twice in {timezone} (the clocks go back that night); "
            "ask which one they mean"
        )
    due = to_utc(first, zone)
    if due <= ensure_utc(now):
        raise ReminderRejectedError(
            f"{format_local(first)} has already passed (it is {format_local(local_now)} in {timezone}); "
            "ask when they mean"
        )
    if due > ensure_utc(now) + MAX_AHEAD:
        raise ReminderRejectedError("a reminder can be at most a year ahead; ask for a nearer time")
    return first


async def set_reminder(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    new: NewReminder,
    *,
    timezone: str,
    now: datetime,
    source_message_id: int | None,
    max_active: int,
) -> SetReminder:
    """Store the reminder and plan its first occurrence; the same request again returns the same one."""
    text = " ".join(new.text.split())
    if not text:
        raise ReminderRejectedError("the reminder needs a text: what should I remind them of?")
    if len(text) > MAX_TEXT:
        raise ReminderRejectedError(f"the reminder's text must be at most {MAX_TEXT} characters")
    first = first_time(new, timezone, now)
    days = sorted(set(new.days)) if new.repeat == "weekly" else []
    if new.repeat == "weekly" and not days:
        days = [first.weekday()]
    key = dedupe_key("reminder", source_message_id, text, format_local(first), new.repeat, *days)
    async with sessions() as session, session.begin():
        existing = await session.scalar(
            select(Reminder).where(Reminder.user_id == user_id, Reminder.dedupe_key == key)
        )
        if existing is not None:
            return SetReminder(existing, parse_local(existing.next_local), created=False)
        active = await session.scalar(
            select(func.count())
            .select_from(Reminder)
            .where(Reminder.user_id == user_id, Reminder.status == "active")
        )
        if (active or 0) >= max_active:
            raise ReminderRejectedError(
                f"they already have {active} reminders, the most I keep; one must be cancelled first"
            )
        reminder = Reminder(
            user_id=user_id,
            text=text,
            repeat=new.repeat,
            days=days,
            day_of_month=first.day,
            next_local=format_local(first),
            timezone=timezone,
            status="active",
            source_message_id=source_message_id,
            dedupe_key=key,
            created_at=now,
            sent_count=0,
            snoozed_count=0,
        )
        session.add(reminder)
        await session.flush()
        _plan(session, reminder, to_utc(first, zone_of(timezone)), occurrence_key(reminder.id, first), now)
    return SetReminder(reminder, first, created=True)


async def advance(session: AsyncSession, reminder: Reminder, *, now: datetime) -> datetime | None:
    """After its regular occurrence: plan the next one in the user's zone, or finish a one-off."""
    zone = zone_of(reminder.timezone)
    days = list(reminder.days or [])
    current = parse_local(reminder.next_local)
    repeat = cast(Repeat, reminder.repeat)
    following = next_after(current, repeat, days, reminder.day_of_month, now=now, zone=zone)
    if following is None:
        reminder.status, reminder.finished_at = "done", now
        return None
    reminder.next_local = format_local(following)
    _plan(session, reminder, to_utc(following, zone), occurrence_key(reminder.id, following), now)
    return following


async def active_reminders(session: AsyncSession, user_id: int) -> Sequence[Reminder]:
    """The user's active reminders, soonest first."""
    stmt = (
        select(Reminder)
        .where(Reminder.user_id == user_id, Reminder.status == "active")
        .order_by(Reminder.next_local, Reminder.id)
    )
    return (await session.execute(stmt)).scalars().all()


async def _cancel_planned(
    session: AsyncSession, reminder_id: int, *, snoozes_only: bool, now: datetime
) -> None:
    stmt = update(Touchpoint).where(Touchpoint.reminder_id == reminder_id, Touchpoint.status == "planned")
    if snoozes_only:
        stmt = stmt.where(Touchpoint.dedupe_key.like("%:snooze:%"))
    await session.execute(
        stmt.values(status="cancelled", outcome="cancelled", finished_at=now).execution_options(
            synchronize_session=False
        )
    )


async def _owned(session: AsyncSession, user_id: int, reminder_id: int) -> Reminder | None:
    return await session.scalar(
        select(Reminder).where(Reminder.id == reminder_id, Reminder.user_id == user_id).with_for_update()
    )


async def cancel_reminder(
    sessions: async_sessionmaker[AsyncSession], user_id: int, reminder_id: int, *, now: datetime
) -> Reminder | None:
    """Cancel one of the user's active reminders and its planned occurrences; None when there is none."""
    async with sessions() as session, session.begin():
        reminder = await _owned(session, user_id, reminder_id)
        if reminder is None or reminder.status != "active":
            return None
        reminder.status, reminder.finished_at = "cancelled", now
        await _cancel_planned(session, reminder.id, snoozes_only=False, now=now)
        return reminder


def snooze_until(choice: Snooze, *, now: datetime, timezone: str) -> datetime:
    """When a snooze ends: in 10 minutes, in an hour, or at this local time tomorrow."""
    if choice in SNOOZES:
        return ensure_utc(now) + SNOOZES[choice]
    zone = zone_of(timezone)
    local = ensure_utc(now).astimezone(zone).replace(tzinfo=None, second=0, microsecond=0)
    return to_utc(local + timedelta(days=1), zone)


async def snooze(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    reminder_id: int,
    choice: Snooze,
    *,
    timezone: str,
    now: datetime,
    pressed: int | None = None,
) -> datetime | None:
    """Send the reminder again later (a one-off that went out comes back); when, or None.

    `pressed` is the message whose snooze button was pressed: it is snoozed once, so a second press
    under it (two members of a group at once) plans nothing more and returns the first one's time.
    """
    async with sessions() as session, session.begin():
        reminder = await _owned(session, user_id, reminder_id)
        if reminder is None or reminder.status == "cancelled":
            return None
        if pressed is not None:
            key = f"reminder:{reminder.id}:snooze:m{pressed}"
            earlier = await session.scalar(
                select(Touchpoint.due_at).where(Touchpoint.user_id == user_id, Touchpoint.dedupe_key == key)
            )
            if earlier is not None:
                return ensure_utc(earlier)
        until = snooze_until(choice, now=now, timezone=timezone)
        reminder.snoozed_count += 1
        if reminder.status == "done":
            reminder.status, reminder.finished_at = "active", None
        if pressed is None:
            key = f"reminder:{reminder.id}:snooze:{reminder.snoozed_count}"
        _plan(session, reminder, until, key, now)
        return until


async def mark_done(
    sessions: async_sessionmaker[AsyncSession], user_id: int, reminder_id: int, *, now: datetime
) -> Reminder | None:
    """Done: pending snoozes go; a one-off is finished, a repeating one keeps its schedule."""
    async with sessions() as session, session.begin():
        reminder = await _owned(session, user_id, reminder_id)
        if reminder is None or reminder.status == "cancelled":
            return None
        await _cancel_planned(session, reminder.id, snoozes_only=reminder.repeat != "once", now=now)
        if reminder.repeat == "once" and reminder.status == "active":
            reminder.status, reminder.finished_at = "done", now
        return reminder


async def move_to_zone(session: AsyncSession, user_id: int, timezone: str) -> int:
    """The user's zone changed: planned occurrences keep their local time in the new zone; how many."""
    moved = 0
    zone = zone_of(timezone)
    for reminder in await active_reminders(session, user_id):
        reminder.timezone = timezone
        local = parse_local(reminder.next_local)
        result = await session.execute(
            update(Touchpoint)
            .where(
                Touchpoint.reminder_id == reminder.id,
                Touchpoint.status == "planned",
                Touchpoint.lease_holder.is_(None),
                Touchpoint.dedupe_key == occurrence_key(reminder.id, local),
            )
            .values(due_at=to_utc(local, zone), timezone=timezone)
            .execution_options(synchronize_session=False)
        )
        moved += int(getattr(result, "rowcount", 0) or 0)
    return moved


@dataclass(frozen=True)
class ReminderStats:
    """Counts since a moment, for admin /stats."""

    set: int
    sent: int
    snoozed: int
    cancelled: int


async def reminder_stats(session: AsyncSession, since: datetime) -> ReminderStats:
    """Reminders set, occurrences sent, snoozes pressed and reminders cancelled since `since`."""
    set_count = await session.scalar(
        select(func.count()).select_from(Reminder).where(Reminder.created_at >= since)
    )
    cancelled = await session.scalar(
        select(func.count())
        .select_from(Reminder)
        .where(Reminder.status == "cancelled", Reminder.finished_at >= since)
    )
    sent = await session.scalar(
        select(func.count())
        .select_from(Touchpoint)
        .where(Touchpoint.kind == REMINDER, Touchpoint.status == "sent", Touchpoint.finished_at >= since)
    )
    snoozed = await session.scalar(
        select(func.count())
        .select_from(Touchpoint)
        .where(
            Touchpoint.kind == REMINDER,
            Touchpoint.dedupe_key.like("%:snooze:%"),
            Touchpoint.planned_at >= since,
        )
    )
    return ReminderStats(int(set_count or 0), int(sent or 0), int(snoozed or 0), int(cancelled or 0))
