"""User commands: /help, /timezone, /language, /export, /forget (with its confirmation).

/memory lives in bot/handlers/memory_facts.py, /followups in touchpoints.py, /reminders in reminders.py."""

from __future__ import annotations

import logging
import re
import tempfile
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ChatType

from agent.account.export import PartWriter, export_events
from agent.account.group_forget import forget_group_words
from agent.account.timezones import Ambiguous, lookup_timezone
from agent.reminders.store import move_to_zone
from agent.search.language import parse_language, set_language
from bot.delivery.sending import send_text
from bot.handlers.context import HandlerContext, sender
from db.inbox import InboxRepository
from db.models import User
from db.repositories.users import UserRepository

logger = logging.getLogger(__name__)

# (command, description) for /help and setMyCommands; admin commands are never advertised.
USER_COMMANDS: tuple[tuple[str, str], ...] = (
    ("start", "say hello (and get to know each other)"),
    ("help", "what I can do"),
    ("memory", "what I remember about you"),
    ("timezone", "show or set your time zone, e.g. /timezone Lisbon"),
    ("language", "show or set the language you write in, e.g. /language French"),
    ("export", "all your data as a JSON file"),
    ("forget", "delete everything I know about you"),
    ("timeline", "our days, their summaries and search, in a Mini App"),
    ("followups", "whether I may write first (on or off)"),
    ("reminders", "the reminders you asked me for, to cancel one"),
)


def help_text(persona_name: str) -> str:
    """/help: who the bot is and the commands it offers."""
    return "\n".join(
        [
            f"I'm {persona_name}. Just write to me like you would to a friend; I remember our conversations.",
            "",
            *(f"/{name} - {text}" for name, text in USER_COMMANDS),
            "",
            "Add me to a group and I answer there when mentioned, replied to or named; what I hear in a "
            "group stays that group's memory.",
        ]
    )


FORGET_CONFIRM = "forget:confirm"
FORGET_CANCEL = "forget:cancel"
FORGET_CONFIRM_GROUPS = "forget:confirm:groups"
FORGET_ASK = (
    "This deletes everything I know about you: our conversations, summaries, facts and your "
    "profile. It cannot be undone. Are you sure? (You can also type /forget confirm.) What you "
    "said in groups stays in those groups' memory unless you delete it too (/forget confirm groups)."
)
BUTTON_NOT_HERE = "This button only works in your own chat with me. To delete your data there: /forget"
NOTHING_TO_SKIP = "Nothing to skip: we're already talking!"


def skipped(name: str) -> str:
    """/skip's answer once onboarding is left."""
    return f"No problem, {name}. Let's just talk! (/timezone sets where you are.)"


FORGOTTEN = "Done. I've forgotten everything about you. If you write again, we start from scratch."
FORGOTTEN_PENDING = (
    "Done: our conversations, summaries, facts and your profile are deleted. One of my memory "
    "stores didn't answer just now, so I'll finish erasing it there automatically in a few minutes. "
    "Nothing of it can reach anyone meanwhile. If you write again, we start from scratch."
)


async def on_help(update: Update, context: HandlerContext) -> None:
    """/help: the user commands."""
    if update.effective_message is not None:
        name = context.services.runtime.settings.persona_name
        await send_text(context.bot, update.effective_message.chat_id, help_text(name))


async def on_timezone(update: Update, context: HandlerContext) -> None:
    """/timezone [place]: show the user's time zone, or set it from a zone, city or country name."""
    if (c := await sender(update, context, limit=None)) is None:
        return
    wanted = " ".join(context.args or [])
    text = await timezone_answer(context.services.runtime.sessions, c.user, wanted)
    await send_text(context.bot, c.message.chat_id, text)


async def timezone_answer(
    sessions: async_sessionmaker[AsyncSession], owner: User, wanted: str, *, group: bool = False
) -> str:
    """/timezone [PLACE] for a person, or /timezone PLACE for a group: the person's zone (no PLACE), or
    the zone PLACE names stored and said, or what to send instead when no place or several go by it."""
    if not wanted:
        return f"Your time zone is {owner.timezone}. To change it: /timezone Lisbon (or Europe/Lisbon)."
    zone = await lookup_timezone(wanted)
    if zone is None:
        return f"I couldn't place {wanted!r}. Try the nearest big city, or a name like Europe/Lisbon."
    if isinstance(zone, Ambiguous):
        choices = "\n".join(f"/timezone {choice.label} ({choice.zone})" for choice in zone.choices)
        return f"There are several places called {zone.name}. Which one? Send one of these:\n{choices}"
    async with sessions() as session, session.begin():
        stored = await session.get(User, owner.id)
        if stored is not None:
            stored.timezone = zone
            if not group:
                stored.profile = {**(stored.profile or {}), "timezone_confirmed": True}
            # Pending reminders keep their local time ("9:00" stays 9:00 in the new zone).
            await move_to_zone(session, owner.id, zone)
    whose = "this group's" if group else "your"
    return f"Got it: {whose} time zone is now {zone}."


async def on_language(update: Update, context: HandlerContext) -> None:
    """/language [code or name]: show the language searches read the user's messages in, or set it."""
    if (c := await sender(update, context, limit=None)) is None:
        return
    wanted = " ".join(context.args or [])
    text = await language_answer(context.services.runtime.sessions, c.user, wanted)
    await send_text(context.bot, c.message.chat_id, text)


async def language_answer(sessions: async_sessionmaker[AsyncSession], user: User, wanted: str) -> str:
    """/language [code or name]: the language the user's messages are searched in, or set to `wanted`."""
    if not wanted:
        known = f"is {user.language}" if user.language else "isn't known yet (I'll tell from your messages)"
        return f"The language I search your messages in {known}. To set it: /language French (or fr)."
    language = parse_language(wanted)
    if language is None:
        return f"I don't know the language {wanted!r}. Try its two-letter code, like /language fr."
    async with sessions() as session, session.begin():
        await set_language(session, user.id, language)
    return f"Got it: I'll search your messages as {language}."


async def on_export(update: Update, context: HandlerContext) -> None:
    """/export: everything stored about the user, as JSON documents in the chat (parts when large)."""
    if (c := await sender(update, context, limit="export")) is None:
        return
    s, user, message = context.services, c.user, c.message
    # Written to a private temporary folder part by part, sent, and deleted right after.
    with tempfile.TemporaryDirectory(prefix="nikita-export-") as folder:
        settings = s.runtime.settings
        writer = PartWriter(
            Path(folder), part_bytes=settings.export_part_bytes, stem=export_stem(settings.persona_name)
        )
        parts = await writer.write_all(export_events(s.runtime.sessions, user.id, s.runtime.data_stores))
        for number, path in enumerate(parts, start=1):
            with path.open("rb") as document:
                await context.bot.send_document(
                    chat_id=message.chat_id,
                    document=document,
                    filename=path.name,
                    caption=export_caption(number, len(parts)),
                )
    logger.info("export sent", extra={"user_id": user.id, "parts": len(parts)})


def export_stem(persona_name: str) -> str:
    """The export's file name before `.json`: "nikita-export", or after PERSONA_NAME=Ada "ada-export"."""
    slug = re.sub(r"[^a-z0-9]+", "-", persona_name.lower()).strip("-")
    return f"{slug}-export" if slug else "export"


def export_caption(number: int, total: int) -> str:
    """What each export document says about itself."""
    if total == 1:
        return "Everything I have stored about you."
    return (
        f"Everything I have stored about you, part {number} of {total}. Together the parts are one "
        "JSON document: merge them key by key, joining the lists in order."
    )


async def on_forget(update: Update, context: HandlerContext) -> None:
    """/forget asks first; /forget confirm (or the button) deletes everything."""
    message, person = update.effective_message, update.effective_user
    if message is None or person is None:
        return
    args = [a.lower() for a in context.args or []]
    if args in (["confirm"], ["confirm", "groups"]):
        await _forget(context, update, person.id, message.chat_id, groups=args == ["confirm", "groups"])
        return
    buttons = InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton("Yes, delete everything", callback_data=FORGET_CONFIRM),
                InlineKeyboardButton("No, keep it", callback_data=FORGET_CANCEL),
            ],
            [InlineKeyboardButton("Yes, and my messages in groups too", callback_data=FORGET_CONFIRM_GROUPS)],
        ]
    )
    await message.reply_text(FORGET_ASK, reply_markup=buttons)


async def on_forget_button(update: Update, context: HandlerContext) -> None:
    """The answer to /forget's question, honoured only in the presser's own private chat."""
    query = update.callback_query
    if query is None:
        return
    chat_id = own_chat(query)
    if chat_id is None:
        # Deleting an account is final: a press that arrives from anywhere but the private chat
        # where /forget asked is not the person answering that question, so nothing happens.
        logger.warning("a forget button outside the sender's private chat was refused")
        await query.answer(BUTTON_NOT_HERE, show_alert=True)
        return
    await query.answer()
    if query.data in (FORGET_CONFIRM, FORGET_CONFIRM_GROUPS):
        groups = query.data == FORGET_CONFIRM_GROUPS
        await _forget(context, update, query.from_user.id, chat_id, groups=groups)
        return
    await send_text(context.bot, chat_id, "Okay, I'll keep everything.")


def own_chat(query: CallbackQuery) -> int | None:
    """The presser's private chat with the bot when the pressed message is in it; otherwise None.

    Every callback acts on `from_user` alone and answers in this chat, so a press can neither act
    for someone else nor speak into someone else's chat.
    """
    message = query.message
    if message is None or message.chat.type != ChatType.PRIVATE or message.chat.id != query.from_user.id:
        return None
    return message.chat.id


async def _forget(
    context: HandlerContext, update: Update, telegram_id: int, chat_id: int, *, groups: bool = False
) -> None:
    s = context.services
    if groups:
        # Their own lines in groups (by speaker), before the person row goes (agent/account/group_forget.py).
        runtime = s.runtime
        caches = runtime.jobs.caches
        await forget_group_words(runtime.sessions, telegram_id, caches=caches, guard=runtime.guard)
    async with s.runtime.sessions() as session:
        user = await UserRepository(session).by_telegram_id(telegram_id)
    pending: tuple[str, ...] = ()
    if user is not None:
        pending = (await s.runtime.forget(user.id)).stores_pending
        logger.info("user forgotten", extra={"user_id": user.id, "stores_pending": len(pending)})
    # The inbox's rows of this sender go too (their answered ones hold no text, but their id).
    async with s.runtime.sessions() as session, session.begin():
        await InboxRepository(session).forget_sender(telegram_id, current_update_id=update.update_id)
    await send_text(context.bot, chat_id, FORGOTTEN_PENDING if pending else FORGOTTEN)
