"""A reminder's occurrence in the touchpoints job: recorded at the time the user chose, no model call.

The follow-up rules (quiet hours, one a day, the weekly cap, "never chase") are for the bot's own
initiative and do not apply: the user asked for this minute. What applies: REMINDERS_PER_DAY (a
user's reminder messages in one local day) and Telegram's 403, handled by the send as for follow-ups.
The message, its transcript row (an assistant turn, kind "reminder") and the next occurrence are
written in one transaction under the lease, so a crash never sends it twice or plans the next twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.clock import ensure_utc, zone_of
from agent.core.settings import Settings
from agent.history.messages import touchpoint_history
from agent.reminders.store import advance, is_snooze
from agent.touchpoints.messenger import chat_of
from agent.turn.transcript import write_message
from db.models import TOUCHPOINT_KIND, Reminder, Touchpoint, User
from db.repositories.conversations import ConversationRepository
from db.repositories.touchpoints import REMINDER


@dataclass(frozen=True)
class Closed:
    """The occurrence is not sent: `outcome` says why."""

    outcome: str


@dataclass(frozen=True)
class Recorded:
    """The occurrence is recorded and must be sent now."""

    text: str
    transcript_message_id: int


def reminder_message(text: str) -> str:
    """What the user receives: the reminder itself, in their own words."""
    return f"⏰ {text}"


async def _sent_today(session: AsyncSession, user: User, now: datetime) -> int:
    zone = zone_of(user.timezone)
    local = ensure_utc(now).astimezone(zone)
    day_start = datetime.combine(local.date(), time(), tzinfo=zone)
    count = await session.scalar(
        select(func.count())
        .select_from(Touchpoint)
        .where(
            Touchpoint.user_id == user.id,
            Touchpoint.kind == REMINDER,
            Touchpoint.status.in_(("sending", "sent")),
            Touchpoint.sent_at >= ensure_utc(day_start),
        )
    )
    return int(count or 0)


async def record_occurrence(
    session: AsyncSession, row: Touchpoint, user: User, *, now: datetime, settings: Settings
) -> Closed | Recorded:
    """Plan the next occurrence and, unless it may not go out, store the message as the assistant's
    turn in a conversation it opens. The caller holds the lease and the user's row lock, and records it."""
    reminder = await session.get(Reminder, row.reminder_id) if row.reminder_id is not None else None
    if reminder is None or reminder.user_id != user.id or reminder.status == "cancelled":
        return Closed("cancelled")
    if is_snooze(row.dedupe_key):
        if reminder.repeat == "once":
            reminder.status, reminder.finished_at = "done", now
    else:
        await advance(session, reminder, now=now)
    if chat_of(user) is None:
        return Closed("no_chat")
    if await _sent_today(session, user, now) >= settings.reminders_per_day:
        return Closed("daily_limit")
    text = reminder_message(reminder.text)
    reason = f"the reminder they asked for: {reminder.text}"
    message_id = await write_first(
        session, user, reason, text, REMINDER, now=now, persona=settings.persona_name
    )
    reminder.sent_count += 1
    return Recorded(text, message_id)


async def write_first(
    session: AsyncSession, user: User, reason: str, text: str, kind: str, *, now: datetime, persona: str
) -> int:
    """Store a message the bot writes first as the assistant's turn (`kind`: a touchpoint's or a reminder's),
    in a conversation of its own that it opens (the person's open one ends); its transcript row's id.
    The caller holds the lease and the person's row lock."""
    conversations = ConversationRepository(session)
    active = await conversations.active_for(user.id)
    if active is not None:
        await conversations.end_and_queue(active, active.last_message_at)
    conversation = await conversations.start(user.id, now)
    conversation.kind = TOUCHPOINT_KIND
    conversation.messages = touchpoint_history(reason, text, now, persona)
    message = await write_message(
        session, user, role="assistant", kind=kind, content=text, sent_at=now, conversation_id=conversation.id
    )
    return message.id
