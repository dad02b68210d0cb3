"""The reminder tools of the chat agent: set, list and cancel; each docstring is the prompt the model reads.

The user is always `ctx.deps.user_id` and the zone theirs, as for the recall tools. Times are local
wall-clock times in the user's zone; the tool checks them and answers with the exact time it set.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, cast

from pydantic_ai import FunctionToolset, ModelRetry, RunContext

from agent.chat.deps import TurnDeps, refused_change
from agent.chat.tools import MAX_ID
from agent.core.errors import ReminderRejectedError
from agent.core.settings import Settings
from agent.reminders.schedule import DAY_NAMES, Repeat, describe, label, parse_local
from agent.reminders.store import NewReminder, active_reminders, cancel_reminder, set_reminder

Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]

reminder_tools: FunctionToolset[TurnDeps] = FunctionToolset()


def _max_active(ctx: RunContext[TurnDeps]) -> int:
    recall = ctx.deps.recall
    if recall is not None:
        return recall.settings.reminders_max_active
    return cast(int, Settings.model_fields["reminders_max_active"].default)


def _when(local: datetime, timezone: str) -> str:
    return f"{label(local)} ({timezone})"


@reminder_tools.tool
async def reminder_set(
    ctx: RunContext[TurnDeps],
    text: str,
    local_time: str,
    repeat: Repeat = "once",
    weekdays: list[Weekday] | None = None,
) -> dict[str, Any]:
    """Set a reminder this person asks for ("remind me tomorrow at 9 to call mom", "every Monday at 8,
    my pills"). I send it myself at that minute, with buttons to mark it done or snooze it.

    The time is their local date and time (your context shows their local time now). When the day
    or the hour is unclear ("later", "in the morning"), ask them first instead of guessing. Tell them
    the exact time from the answer's `when`. When `set` is false, tell them `problem` and ask.

    Args:
        text: What to remind them of, short, in their words and language, e.g. "call mom".
        local_time: The first time it goes off, local, as YYYY-MM-DD HH:MM.
        repeat: once, daily, weekdays (Monday to Friday), weekly (on `weekdays`) or monthly.
        weekdays: Only for weekly: the days, e.g. ["mon", "thu"].
    """
    try:
        local = parse_local(local_time)
    except ValueError as exc:
        raise ModelRetry(
            f"local_time must be YYYY-MM-DD HH:MM in their local time, got {local_time!r}"
        ) from exc
    days = [DAY_NAMES.index(day) for day in weekdays or []]
    try:
        stored = await set_reminder(
            ctx.deps.sessions,
            ctx.deps.user_id,
            NewReminder(text, local, repeat, days),
            timezone=ctx.deps.timezone,
            now=ctx.deps.now,
            source_message_id=ctx.deps.message_id,
            max_active=_max_active(ctx),
        )
    except ReminderRejectedError as exc:
        return {"set": False, "problem": str(exc)}
    reminder = stored.reminder
    return {
        "set": True,
        "reminder_id": reminder.id,
        "when": _when(stored.first, reminder.timezone),
        "repeat": describe(cast(Repeat, reminder.repeat), reminder.days or []),
        "text": reminder.text,
    }


@reminder_tools.tool
async def reminder_list(ctx: RunContext[TurnDeps]) -> dict[str, Any]:
    """List this person's active reminders (to tell them, or to find the one they want cancelled)."""
    async with ctx.deps.sessions() as session:
        reminders = await active_reminders(session, ctx.deps.user_id)
    return {
        "reminders": [
            {
                "reminder_id": r.id,
                "text": r.text,
                "next": _when(parse_local(r.next_local), r.timezone),
                "repeat": describe(cast(Repeat, r.repeat), r.days or []),
            }
            for r in reminders
        ]
    }


@reminder_tools.tool
async def reminder_cancel(ctx: RunContext[TurnDeps], reminder_id: int) -> dict[str, Any]:
    """Cancel one of this person's reminders ("cancel the pill reminder"); find its id with `reminder_list`.

    Args:
        reminder_id: The reminder's id from `reminder_list`.
    """
    if (refused := refused_change(ctx.deps)) is not None:
        return refused
    if not 1 <= reminder_id <= MAX_ID:
        raise ModelRetry("reminder_id must be an id from reminder_list")
    cancelled = await cancel_reminder(ctx.deps.sessions, ctx.deps.user_id, reminder_id, now=ctx.deps.now)
    if cancelled is None:
        raise ModelRetry("no active reminder has that id; call reminder_list for their reminders")
    return {"cancelled": True, "text": cancelled.text}
