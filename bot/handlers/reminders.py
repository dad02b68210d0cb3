"""/reminders with a cancel button per reminder, and the done and snooze buttons under a reminder."""

from __future__ import annotations

import logging
from typing import cast

from telegram import InlineKeyboardMarkup, Update

from agent.core.clock import ensure_utc
from agent.reminders.schedule import Repeat, describe, label, parse_local
from agent.reminders.store import Snooze, active_reminders, cancel_reminder, mark_done, snooze
from agent.touchpoints.plans import zone_of
from bot.delivery.reminder_buttons import cancel_button, parse_press
from bot.delivery.sending import send_text
from bot.handlers.commands import own_chat
from bot.handlers.context import HandlerContext, sender
from db.repositories.users import UserRepository

logger = logging.getLogger(__name__)

NONE_SET = (
    'You have no reminders. Just ask me, e.g. "remind me tomorrow at 9 to call mom" or '
    '"every Monday at 8 remind me to take my pills".'
)
NOT_HERE = "This button only works in your own chat with me: /reminders"
GONE = "That reminder is no longer there."
# Telegram shows a button's label on one line; longer texts are cut with an ellipsis.
LABEL_CHARS = 40


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


async def on_reminders(update: Update, context: HandlerContext) -> None:
    """/reminders: the user's active reminders, each with its next local time and a cancel button."""
    if (c := await sender(update, context, limit="memory")) is None:
        return
    async with context.services.runtime.sessions() as session:
        reminders = await active_reminders(session, c.user.id)
    if not reminders:
        await send_text(context.bot, c.message.chat_id, NONE_SET)
        return
    lines = ["Your reminders:"]
    for r in reminders:
        repeat = describe(cast(Repeat, r.repeat), r.days or [])
        lines.append(f"- {r.text}: {label(parse_local(r.next_local))} ({repeat})")
    lines.append("To cancel one, press its button or just tell me.")
    buttons = InlineKeyboardMarkup([[cancel_button(r.id, _short(r.text))] for r in reminders])
    await context.bot.send_message(chat_id=c.message.chat_id, text="\n".join(lines), reply_markup=buttons)


async def on_reminder_button(update: Update, context: HandlerContext) -> None:
    """Done, snooze or cancel, on a reminder of the presser's own, in their own chat."""
    query = update.callback_query
    if query is None:
        return
    press = parse_press(query.data)
    chat_id = own_chat(query)
    if chat_id is None or press is None:
        await query.answer(NOT_HERE, show_alert=True)
        return
    s = context.services
    runtime = s.runtime
    now = runtime.clock.now()
    async with runtime.sessions() as session:
        user = await UserRepository(session).by_telegram_id(query.from_user.id)
    if user is None:
        await query.answer(GONE, show_alert=True)
        return
    if press.action == "snooze":
        until = await snooze(
            runtime.sessions,
            user.id,
            press.reminder_id,
            cast(Snooze, press.choice),
            timezone=user.timezone,
            now=now,
        )
        if until is None:
            await query.answer(GONE, show_alert=True)
            return
        zone = zone_of(user.timezone)
        local = ensure_utc(until).astimezone(zone)
        later = "" if local.date() == now.astimezone(zone).date() else " tomorrow"
        await query.answer(f"Snoozed until {local:%H:%M}{later}")
        await query.edit_message_reply_markup(reply_markup=None)
        return
    if press.action == "done":
        done = await mark_done(runtime.sessions, user.id, press.reminder_id, now=now)
        await query.answer("Done ✓" if done is not None else GONE)
        await query.edit_message_reply_markup(reply_markup=None)
        return
    cancelled = await cancel_reminder(runtime.sessions, user.id, press.reminder_id, now=now)
    await query.answer()
    await send_text(context.bot, chat_id, f"Cancelled: {cancelled.text}" if cancelled is not None else GONE)
