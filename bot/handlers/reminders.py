"""/reminders with a cancel button per reminder, and the done and snooze buttons under a reminder.

A button acts on a reminder of the chat it is pressed in: in a private chat the presser's own, in a
group the group's (the group's owner row), which any member may mark done or snooze. The reminder
id in the button's data is only looked for among that chat's reminders, so data crafted with
another owner's id finds nothing: from a group no member's private reminder is reached, from a
private chat no group's.
"""

from __future__ import annotations

import logging
from typing import Literal, cast

from telegram import CallbackQuery, InlineKeyboardMarkup, Update
from telegram.constants import ChatType

from agent.account.groups import is_group
from agent.core.clock import ensure_utc, zone_of
from agent.reminders.schedule import Repeat, describe, label, parse_local
from agent.reminders.store import Snooze, active_reminders, cancel_reminder, mark_done, snooze
from bot.delivery.reminder_buttons import cancel_button, parse_press
from bot.delivery.sending import drop_buttons, send_text
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


def _where(query: CallbackQuery, *, groups: bool) -> Literal["private", "group"] | None:
    """Where the pressed message is: the presser's own chat, a group (when groups are on), or neither."""
    chat = query.message.chat if query.message is not None else None
    if chat is None:
        return None
    if chat.type == ChatType.PRIVATE:
        return "private" if chat.id == query.from_user.id else None
    return "group" if groups and chat.type in (ChatType.GROUP, ChatType.SUPERGROUP) else None


async def on_reminder_button(update: Update, context: HandlerContext) -> None:
    """Done, snooze or cancel, on a reminder of the chat pressed in: the presser's own, or the group's."""
    query = update.callback_query
    if query is None:
        return
    runtime = context.services.runtime
    press = parse_press(query.data)
    where = _where(query, groups=runtime.settings.groups_enabled)
    if press is None or where is None or query.message is None:
        await query.answer(NOT_HERE, show_alert=True)
        return
    chat_id = query.message.chat.id
    async with runtime.sessions() as session:
        users = UserRepository(session)
        # In a group the group's row, never the presser's: a member needs no row of their own here.
        user = await (users.by_chat_id(chat_id) if where == "group" else users.by_telegram_id(chat_id))
    if user is None or is_group(user) != (where == "group"):
        await query.answer(GONE, show_alert=True)
        return
    now = runtime.clock.now()
    if press.action == "snooze":
        until = await snooze(
            runtime.sessions,
            user.id,
            press.reminder_id,
            cast(Snooze, press.choice),
            timezone=user.timezone,
            now=now,
            pressed=query.message.message_id,
        )
        if until is None:
            await query.answer(GONE, show_alert=True)
            return
        zone = zone_of(user.timezone)
        local = ensure_utc(until).astimezone(zone)
        later = "" if local.date() == now.astimezone(zone).date() else " tomorrow"
        await query.answer(f"Snoozed until {local:%H:%M}{later}")
        await drop_buttons(query)
        return
    if press.action == "done":
        done = await mark_done(runtime.sessions, user.id, press.reminder_id, now=now)
        await query.answer("Done ✓" if done is not None else GONE)
        await drop_buttons(query)
        return
    cancelled = await cancel_reminder(runtime.sessions, user.id, press.reminder_id, now=now)
    if cancelled is None:
        await query.answer(GONE, show_alert=True)
        return
    await query.answer()
    await send_text(context.bot, chat_id, f"Cancelled: {cancelled.text}")
