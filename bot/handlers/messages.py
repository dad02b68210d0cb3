"""Message handlers: text to the turn (or onboarding), everything else stored and answered briefly."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta

from telegram import Message, Update
from telegram.error import TelegramError
from telegram.ext import ApplicationHandlerStop

from agent.chat.attachments import Attachment
from agent.core.errors import LeaseLostError
from bot.delivery.failures import ERROR_REPLY, is_retryable
from bot.delivery.sending import send_text, typing
from bot.delivery.streaming import preview
from bot.handlers.commands import NOTHING_TO_SKIP, skipped
from bot.handlers.context import HandlerContext, Sender, sender

logger = logging.getLogger(__name__)

UNKNOWN_COMMAND = "I don't know that command. /help lists what I can do."
OTHER_REPLY = "I can only read text for now."

# What arrived -> (how the transcript shows it, what the bot says back).
_REPLIES = {
    "sticker": "Ha, nice sticker! I can only read words though, so tell me what's on your mind.",
    # Photos, text files and (with transcription set up) voice notes reach the model once onboarding
    # is complete (bot/handlers/media.py); until then, and otherwise, these answers stand.
    "photo": "I'll look at pictures once we've finished getting to know each other. Tell me in words?",
    "voice": "I can't listen to voice messages yet. Could you type it for me?",
    "video": "I can't watch videos yet. What's it about?",
    "video_note": "I can't watch video messages yet. Could you type it for me?",
    "animation": "I can't see GIFs yet, but I appreciate the effort!",
    "audio": "I can't listen to audio yet. What's it about?",
    "document": "I can't open files yet. If it's text, paste the part you want me to read.",
    "location": "Thanks! I can't read locations, but if you tell me your city I can use /timezone.",
    "contact": "I can't use contacts, sorry.",
    "poll": "I can't vote in polls, but ask me in words and I'll answer!",
}


def describe(message: Message) -> tuple[str, str]:
    """The kind of a non-text message and its transcript text, e.g. ("sticker", "[sticker 😀]")."""
    for kind in _REPLIES:
        if getattr(message, kind, None):
            break
    else:
        kind = "other"
    detail = ""
    if message.sticker and message.sticker.emoji:
        detail = f" {message.sticker.emoji}"
    elif message.document and message.document.file_name:
        detail = f" {message.document.file_name}"
    elif message.voice:
        # PTB gives an int or a timedelta depending on PTB_TIMEDELTA.
        duration = message.voice.duration
        seconds = duration.total_seconds() if isinstance(duration, timedelta) else duration
        detail = f" {round(seconds)}s"
    caption = f" {message.caption}" if message.caption else ""
    return kind, f"[{kind.replace('_', ' ')}{detail}]{caption}"


async def on_text(update: Update, context: HandlerContext) -> None:
    """A text message: onboarding until it is complete, then the turn (the inbox sends the answer)."""
    message = update.effective_message
    if message is not None and message.text is not None:
        await answer(update, context, message.text)


@dataclass(frozen=True)
class Fetched:
    """A media message made ready for the model: its transcript text and files, or a short refusal."""

    text: str
    attachments: Sequence[Attachment] = ()
    refusal: str | None = None


Fetch = Callable[[], Awaitable[Fetched]]


async def answer(
    update: Update,
    context: HandlerContext,
    text: str,
    *,
    kind: str = "text",
    fetch: Fetch | None = None,
) -> None:
    """Run the turn for a message (`text` is what the transcript shows).

    Media (`fetch` downloads or transcribes them, in order, after the limits) wait for onboarding.
    """
    if (c := await sender(update, context)) is None:
        return
    s, row, message, person, user = context.services, context.row, c.message, c.person, c.user
    onboarding = user.onboarding_status != "complete"
    if onboarding and kind != "text":
        await store_short_answer(context, c, kind, text, _REPLIES.get(kind, OTHER_REPLY))
        return
    if onboarding and await s.over_limit(
        context.bot, person, message.chat_id, message.date, "onboarding", once_for=message.message_id
    ):
        return
    attachments: Sequence[Attachment] = ()
    if fetch is not None:
        fetched = await fetch()
        if fetched.refusal is not None:
            await store_short_answer(context, c, kind, fetched.text, fetched.refusal)
            return
        text, attachments = fetched.text, fetched.attachments
    async with (
        typing(context.bot, message.chat_id),
        preview(context.bot, message, s.runtime.settings, row, s.delivery.stops) as progress,
    ):
        said = c.incoming(text, kind=kind)
        if onboarding:
            answered = await s.runtime.turns.onboard(said, fallback_name=person.first_name)
            if answered is not None:
                row.answer(answered.text, repeated=answered.duplicate)
                return
        # A repeat is this row's message run again: its stored answer was never (fully) sent.
        result = await s.runtime.turns.reply(said, progress=progress, attachments=attachments)
        row.answer(result.text, repeated=result.duplicate)


async def on_start(update: Update, context: HandlerContext) -> None:
    """/start: onboarding for someone new, a short welcome back for everyone else."""
    if (c := await sender(update, context, limit="start")) is None:
        return
    s, message, person, user = context.services, c.message, c.person, c.user
    if user.onboarding_status == "complete":
        name = user.name or person.first_name
        await send_text(
            context.bot,
            message.chat_id,
            f"Hi {name}! I'm {s.runtime.settings.persona_name}. Just write to me whenever you like. "
            "/help lists what else I can do.",
        )
        return
    # Onboarding's answer to /start is a model call: it counts as one.
    if await s.over_limit(context.bot, person, message.chat_id, message.date, "onboarding"):
        return
    async with typing(context.bot, message.chat_id):
        said = c.incoming(message.text or "/start")
        answered = await s.runtime.turns.onboard(said, fallback_name=person.first_name)
        if answered is not None:
            context.row.answer(answered.text, repeated=answered.duplicate)


async def on_skip(update: Update, context: HandlerContext) -> None:
    """/skip: leave onboarding now with what was collected."""
    if (c := await sender(update, context, limit=None)) is None:
        return
    s, message, person, user = context.services, c.message, c.person, c.user
    if user.onboarding_status == "complete":
        await send_text(context.bot, message.chat_id, NOTHING_TO_SKIP)
        return
    await s.runtime.turns.skip_onboarding(user.id, person.first_name)
    await send_text(context.bot, message.chat_id, skipped(user.name or person.first_name))


async def on_other(update: Update, context: HandlerContext) -> None:
    """Stickers, photos, voice, files...: stored as what they are, a short reply, no model call."""
    message = update.effective_message
    if message is not None:
        kind, content = describe(message)
        await short_answer(update, context, kind, content, _REPLIES.get(kind, OTHER_REPLY))


async def short_answer(update: Update, context: HandlerContext, kind: str, content: str, reply: str) -> None:
    """Store a message the model does not see, with `reply` as its answer (the inbox sends it)."""
    if (c := await sender(update, context)) is not None:
        await store_short_answer(context, c, kind, content, reply)


async def store_short_answer(
    context: HandlerContext, who: Sender, kind: str, content: str, reply: str
) -> None:
    """The storing half of `short_answer`, for callers past the preamble."""
    # Stored once; the inbox sends the answer.
    said = who.incoming(content, kind=kind)
    answered = await context.services.runtime.turns.short_answer(said, answer=reply)
    context.row.answer(answered.text, repeated=answered.duplicate)


async def on_unknown_command(update: Update, context: HandlerContext) -> None:
    """Any command nobody handled (including admin commands from non-admins)."""
    if update.effective_message is not None:
        await send_text(context.bot, update.effective_message.chat_id, UNKNOWN_COMMAND)


async def on_ignored(update: Update, context: HandlerContext) -> None:
    """Edited messages and channel posts: noted in the log, otherwise ignored."""
    logger.debug("ignored update", extra={"update_id": update.update_id})


async def on_error(update: object, context: HandlerContext) -> None:
    """The one error handler: log with context, tell the user honestly that it failed.

    For an update worked from the inbox the dispatcher decides: it retries transient database and
    network errors, sends an answer the handler gave before the failure, or apologises.
    """
    error = context.error
    details: dict[str, object] = {"error": repr(error)}
    chat_id: int | None = None
    # PTB's error handling runs inside the dispatcher's call of the handlers, for the same row.
    row = context.row_if_any
    if isinstance(update, Update):
        details["update_id"] = update.update_id
        if update.effective_user is not None:
            details["telegram_user_id"] = update.effective_user.id
        if update.effective_chat is not None:
            chat_id = update.effective_chat.id
    if row is not None and error is not None and is_retryable(error):
        logger.warning("update failed; the inbox retries it", extra=details)
    elif row is not None and isinstance(error, LeaseLostError):
        # Another worker holds the row, or its intake commit failed: the dispatcher handles it.
        logger.warning("update left to the inbox: %s", type(error).__name__, extra=details)
    else:
        # The formatter prints the error and its traceback with bound values hidden (bot/logs.py).
        logger.error("update failed", extra=details, exc_info=error)
    if row is not None:
        row.error = error
        raise ApplicationHandlerStop  # no other handler group runs for a failed update
    if chat_id is not None:
        # If Telegram itself is failing, the apology fails too; the log already has the story.
        with suppress(TelegramError):
            await context.bot.send_message(chat_id=chat_id, text=ERROR_REPLY)
