"""How a command in a group is answered: to its sender alone when it came as an ephemeral command,
otherwise as a reply in its topic, for everyone.

A command the group menu registers with is_ephemeral (bot/handlers/group_commands.py) arrives from a
current Telegram app with an ephemeral_message_id: only its sender and the bot see it. Its answer is
sent to that sender alone (receiver_user_id) as a reply to it (reply_parameters.ephemeral_message_id),
so the group sees neither. Neither is part of the group's history and nothing of them is stored in
the group's memory. Telegram does not promise to deliver an ephemeral message to someone offline.
An older app, or the command typed by hand, sends an ordinary message, answered as an ordinary reply.

A refused ephemeral answer is sent as the ordinary reply instead. When the refusal says the server
does not know ephemeral messages (one older than 10.2 ignores the new fields and then misses the
reply's message_id), this process stops asking (logged once); any other refusal (the ephemeral
message gone, its time to answer passed) costs that one answer only.

python-telegram-bot knows none of these fields yet: the incoming id is read from the message's
api_kwargs and the send passes them as api_kwargs.
"""

from __future__ import annotations

import logging
from typing import Any

from telegram import InlineKeyboardMarkup, Message, Update
from telegram.error import BadRequest

from bot.delivery.placement import placement
from bot.delivery.sending import split_text
from bot.handlers.context import HandlerContext
from bot.preflight import one_line

logger = logging.getLogger(__name__)


def ephemeral_id(message: Message) -> int | None:
    """The ephemeral_message_id of a message only its sender and the bot see (Bot API 10.2), or None."""
    value = getattr(message, "ephemeral_message_id", None) or message.api_kwargs.get("ephemeral_message_id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def ephemeral_params(receiver_id: int, replied_id: int) -> dict[str, Any]:
    """The send parameters of an answer seen only by `receiver_id`, replying to their ephemeral message.

    Bot API 10.2 takes the receiver as receiver_user_id; 10.3 moved it into ephemeral_message_parameters.
    A server reads the one it knows and ignores the other, so both go.
    """
    return {
        "receiver_user_id": receiver_id,
        "ephemeral_message_parameters": {"receiver_user_id": receiver_id},
        "reply_parameters": {"ephemeral_message_id": replied_id},
    }


def predates_ephemeral(exc: BadRequest) -> bool:
    """Whether a refusal comes from a server that does not know ephemeral messages: it ignored the
    ephemeral fields, so the reply parameters it read lacked their message_id."""
    return "message_id" in exc.message and "ephemeral" not in exc.message.lower()


def _public_placement(update: Update, message: Message) -> dict[str, Any]:
    where = placement(update.to_dict())
    if ephemeral_id(message) is not None:
        # An ephemeral command is in no one's history: the public answer replies to nothing, in its topic.
        where.pop("reply_parameters", None)
    return where


async def answer_command(
    context: HandlerContext,
    update: Update,
    text: str,
    *,
    public: bool = False,
    reply_markup: InlineKeyboardMarkup | None = None,
) -> None:
    """Answer a group command: privately when it came as an ephemeral command (unless `public`: news the
    whole group should have), else as a reply in its topic; `reply_markup` goes under the last part."""
    message = update.effective_message
    assert message is not None
    chunks = split_text(text) or ["…"]
    replied, data = ephemeral_id(message), context.bot_data
    # Someone speaking as a chat (an anonymous admin) has no user to receive it alone.
    person = message.from_user if message.sender_chat is None else None
    if not public and replied is not None and person is not None and not data.ephemeral_refused:
        topic = placement(update.to_dict()).get("message_thread_id")
        private = ephemeral_params(person.id, replied)
        try:
            while chunks:
                await context.bot.send_message(
                    chat_id=message.chat_id,
                    text=chunks[0],
                    message_thread_id=topic,
                    api_kwargs=private,
                    reply_markup=reply_markup if len(chunks) == 1 else None,
                )
                chunks.pop(0)
            return
        except BadRequest as exc:
            if not predates_ephemeral(exc):
                logger.info(
                    "an ephemeral answer was refused: this one answers in the group",
                    extra={"chat_id": message.chat_id, "error": one_line(exc)},
                )
            elif not data.ephemeral_refused:
                data.ephemeral_refused = True
                logger.warning(
                    "the Bot API server refused an ephemeral answer: group commands answer in the group",
                    extra={"chat_id": message.chat_id, "error": one_line(exc)},
                )
    where = _public_placement(update, message)
    for index, chunk in enumerate(chunks, start=1):
        markup = reply_markup if index == len(chunks) else None
        await context.bot.send_message(chat_id=message.chat_id, text=chunk, reply_markup=markup, **where)
