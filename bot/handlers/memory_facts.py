"""/memory: what the bot remembers, then the facts a page at a time, each with a "forget this" button."""

from __future__ import annotations

import logging

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest

from agent.memory.corrections import FactsPage, facts_page
from agent.reports.texts import memory_report
from bot.delivery.sending import split_text
from bot.handlers.commands import own_chat
from bot.handlers.context import HandlerContext, sender
from bot.runtime import Runtime
from db.repositories.users import UserRepository

logger = logging.getLogger(__name__)

PREFIX = "memfact"
PAGE_SIZE = 8
LABEL_CHARS = 48
NOTHING = "I don't remember any facts about you yet."
NOT_HERE = "This button only works in your own chat with me: /memory"
REASON = "they pressed forget under /memory"


def _label(text: str) -> str:
    text = text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
    return f"Forget: {text}"


def page_message(page: FactsPage) -> tuple[str, InlineKeyboardMarkup | None]:
    """The page's text and its buttons: one per fact, then the way to the other pages."""
    if not page.facts:
        return NOTHING, None
    lines = [f"Facts I remember (page {page.page} of {page.pages}):"]
    lines += [f"- {fact.content}" for fact in page.facts]
    rows = [
        [InlineKeyboardButton(_label(f.content), callback_data=f"{PREFIX}:forget:{f.id}:{page.page}")]
        for f in page.facts
    ]
    moves = []
    if page.page > 1:
        moves.append(InlineKeyboardButton("‹ Newer", callback_data=f"{PREFIX}:page:{page.page - 1}"))
    if page.page < page.pages:
        moves.append(InlineKeyboardButton("Older ›", callback_data=f"{PREFIX}:page:{page.page + 1}"))
    if moves:
        rows.append(moves)
    return "\n".join(lines), InlineKeyboardMarkup(rows)


async def read_page(runtime: Runtime, user_id: int, page: int) -> FactsPage:
    """One page of the user's facts."""
    async with runtime.sessions() as session:
        return await facts_page(session, user_id, page=page, size=PAGE_SIZE)


async def on_memory(update: Update, context: HandlerContext) -> None:
    """/memory: profile, open threads, today's summary and a few facts, a button per fact to forget it."""
    if (c := await sender(update, context, limit="memory")) is None:
        return
    runtime = context.services.runtime
    report = await memory_report(runtime.sessions, c.user.id, c.message.date)
    # The newest facts' buttons go under the report; "Older" turns it into the list of facts.
    _, markup = page_message(await read_page(runtime, c.user.id, 1))
    *first, last = split_text(report) or ["…"]
    for chunk in first:
        await context.bot.send_message(chat_id=c.message.chat_id, text=chunk)
    await context.bot.send_message(chat_id=c.message.chat_id, text=last, reply_markup=markup)


async def on_fact_button(update: Update, context: HandlerContext) -> None:
    """Forget one fact of the presser's own, or turn the page; in their own chat only."""
    query = update.callback_query
    if query is None:
        return
    parts = (query.data or "").split(":")
    chat_id = own_chat(query)
    if chat_id is None or len(parts) < 3 or not all(p.isdigit() for p in parts[2:]):
        await query.answer(NOT_HERE, show_alert=True)
        return
    runtime = context.services.runtime
    async with runtime.sessions() as session:
        user = await UserRepository(session).by_telegram_id(query.from_user.id)
    if user is None:
        await query.answer(NOTHING, show_alert=True)
        return
    page = int(parts[-1])
    if parts[1] == "forget" and len(parts) == 4:
        gone = (
            await runtime.facts.forget_fact(user.id, int(parts[2]), reason=REASON, at=runtime.clock.now())
            if runtime.facts is not None
            else None
        )
        await query.answer("Forgotten." if gone is not None else "That one is already forgotten.")
    else:
        await query.answer()
    text, markup = page_message(await read_page(runtime, user.id, page))
    try:
        await query.edit_message_text(text, reply_markup=markup)
    except BadRequest as exc:  # "message is not modified": the page did not change
        logger.info("memory page unchanged", extra={"error": exc.message})
