"""/followups on|off and the "Stop follow-ups" button: the user's choice about touchpoints."""

from __future__ import annotations

from telegram import Update

from agent.touchpoints.choice import allow_touchpoints
from agent.touchpoints.rules import enabled_for
from bot.delivery.sending import drop_buttons, send_text
from bot.handlers.commands import own_chat
from bot.handlers.context import HandlerContext, sender
from db.repositories.users import UserRepository

USAGE = "Follow-ups are {state}. /followups on or /followups off to change it."
TURNED_ON = "Okay: now and then I'll come back to something you told me. /followups off stops it."
TURNED_OFF = "Okay, I won't write first any more. I'm here whenever you write. (/followups on to undo.)"


async def on_followups(update: Update, context: HandlerContext) -> None:
    """/followups [on|off]: show or change whether the bot may write first."""
    if (c := await sender(update, context, limit="memory")) is None:
        return
    s, user, message = context.services, c.user, c.message
    choice = (context.args or [""])[0].strip().lower()
    if choice in ("on", "off"):
        await allow_touchpoints(s.runtime.sessions, user.id, choice == "on", now=s.runtime.clock.now())
        await send_text(context.bot, message.chat_id, TURNED_ON if choice == "on" else TURNED_OFF)
        return
    state = "on" if enabled_for(user.followups, s.runtime.settings) else "off"
    await send_text(context.bot, message.chat_id, USAGE.format(state=state))


async def on_followups_button(update: Update, context: HandlerContext) -> None:
    """The button under a touchpoint: touchpoints off for the presser, in their own chat."""
    query = update.callback_query
    if query is None:
        return
    chat_id = own_chat(query)
    if chat_id is None:
        await query.answer("This button only works in your own chat with me: /followups off", show_alert=True)
        return
    s = context.services
    async with s.runtime.sessions() as session:
        user = await UserRepository(session).by_telegram_id(query.from_user.id)
    await query.answer()
    if user is not None:
        await allow_touchpoints(s.runtime.sessions, user.id, False, now=s.runtime.clock.now())
    await drop_buttons(query)
    await send_text(context.bot, chat_id, TURNED_OFF)
