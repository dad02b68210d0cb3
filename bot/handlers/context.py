"""The handlers' context: python-telegram-bot's `CallbackContext` typed for this bot, and the preamble
every user command and message handler starts with.

`bot.app.build_application` registers `HandlerContext` with `ContextTypes`, so every handler (and
the error handler) gets one: `context.services` are the bot's services (bot/services.py) and
`context.row` is the inbox row whose update the handlers work, which a handler gives its answer to
send (bot/delivery/worked_row.py). The row comes with the update: the dispatcher passes a
`WorkedUpdate` (bot/delivery/worked_update.py), and `from_update` takes the row from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from telegram import Message, Update
from telegram import User as TelegramUser
from telegram.ext import Application, CallbackContext, ExtBot

from agent.account.ratelimit import Scope
from agent.turn.transcript import Incoming, Speaker
from bot.delivery.worked_row import WorkedRow
from bot.delivery.worked_update import WorkedUpdate
from bot.services import BotData, BotServices
from db.models import User


class HandlerContext(CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], BotData]):
    """What a handler reads besides the update: the bot's services and the inbox row it works."""

    def __init__(
        self,
        application: Application[Any, Any, Any, Any, Any, Any],
        chat_id: int | None = None,
        user_id: int | None = None,
    ) -> None:
        super().__init__(application, chat_id=chat_id, user_id=user_id)
        # Outside the inbox (an error raised by a job or a task of its own) there is no row.
        self.row_if_any: WorkedRow | None = None

    @classmethod
    def from_update(
        cls, update: object, application: Application[Any, HandlerContext, Any, Any, Any, Any]
    ) -> HandlerContext:
        """The context of one update's handlers (and of its error handler), with its inbox row."""
        context = super().from_update(update, application)
        if isinstance(update, WorkedUpdate):
            context.row_if_any = update.row
        return context

    @property
    def services(self) -> BotServices:
        """The runtime and the bot's own helpers."""
        return self.bot_data.services

    @property
    def row(self) -> WorkedRow:
        """The inbox row the running handler works: give it the answer (`row.answer`), and the
        dispatcher sends it."""
        if self.row_if_any is None:
            raise RuntimeError("no inbox row is worked here: updates reach the handlers through the inbox")
        return self.row_if_any


@dataclass(frozen=True)
class Sender:
    """Who sent a message or command, where, and their stored account."""

    message: Message
    person: TelegramUser
    user: User

    def incoming(self, text: str, *, kind: str = "text") -> Incoming:
        """The sender's message as a turn takes it: their account as read here (not read again)."""
        return incoming(self.message, self.user, text, kind)


def incoming(
    message: Message,
    owner: User,
    text: str,
    kind: str,
    *,
    speaker: Speaker | None = None,
    may_change_memory: bool = True,
) -> Incoming:
    """A Telegram message as a turn of `owner` (a person, or a group's memory) takes it, with the
    owner's row as the handler read it."""
    return Incoming(
        owner=owner.id,
        text=text,
        sent_at=message.date,
        kind=kind,
        telegram_message_id=message.message_id,
        person=owner,
        speaker=speaker,
        may_change_memory=may_change_memory,
    )


async def sender(
    update: Update, context: HandlerContext, *, limit: Scope | None = "message"
) -> Sender | None:
    """The preamble of user commands and message handlers: the sender and their account (created on
    first contact), or None when there is no one to answer or, with `limit`, the sender is over that
    rate limit (and has been told so once). Limits are counted before any row is written, a new
    message once however often its inbox row runs."""
    message, person = update.effective_message, update.effective_user
    if message is None or person is None:
        return None
    once_for = message.message_id if update.message is message else None
    user = await context.services.admit(
        context.bot, person, message.chat_id, message.date, limit, once_for=once_for
    )
    return Sender(message, person, user) if user is not None else None
