"""The bot's side of touchpoints: the messenger the touchpoints job writes through.

The same rendering as replies (Markdown as text + entities, split at Telegram's limit); the last
chunk carries the button that stops touchpoints (under a reminder: done and snooze). A 403 (blocked,
deactivated) is the job's `RecipientBlockedError`; any other refusal is a `SendFailedError`, tried
again later from the first chunk Telegram did not take.
"""

from __future__ import annotations

import logging

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import BadRequest, Forbidden, TelegramError

from agent.core import observability
from agent.core.errors import RecipientBlockedError, SendFailedError
from agent.touchpoints.messenger import ChunkSent
from bot.delivery.formatting import Chunk, render
from bot.delivery.reminder_buttons import reminder_buttons

logger = logging.getLogger(__name__)

FOLLOWUPS_OFF = "followups:off"
STOP_LABEL = "Stop follow-ups"


def stop_button() -> InlineKeyboardMarkup:
    """The button under each touchpoint that is not a reminder."""
    return InlineKeyboardMarkup([[InlineKeyboardButton(STOP_LABEL, callback_data=FOLLOWUPS_OFF)]])


class TelegramMessenger:
    """Sends touchpoints with the bot (bot/delivery/formatting.py's rendering, as replies)."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot

    async def send(
        self, chat_id: int, text: str, *, start: int, on_sent: ChunkSent, reminder_id: int | None = None
    ) -> int:
        """Send the chunks from `start`; `on_sent` after each one Telegram accepted."""
        chunks = render(text) or [Chunk("…")]
        buttons = stop_button() if reminder_id is None else reminder_buttons(reminder_id)
        for index in range(start, len(chunks)):
            markup = buttons if index == len(chunks) - 1 else None
            try:
                await self._send(chat_id, chunks[index], markup)
            except Forbidden as exc:
                raise RecipientBlockedError(exc.message) from exc
            except BadRequest as exc:
                if "chat not found" in exc.message.lower():
                    raise RecipientBlockedError(exc.message) from exc
                raise SendFailedError(exc.message) from exc
            except TelegramError as exc:
                raise SendFailedError(exc.message) from exc
            await on_sent(index + 1, len(chunks))
        if start < len(chunks):
            observability.touchpoint_sent(reminder=reminder_id is not None)
        return len(chunks)

    async def _send(self, chat_id: int, chunk: Chunk, markup: InlineKeyboardMarkup | None) -> None:
        try:
            await self.bot.send_message(
                chat_id=chat_id, text=chunk.text, entities=chunk.entities or None, reply_markup=markup
            )
        except BadRequest as exc:
            if not chunk.entities or "chat not found" in exc.message.lower():
                raise
            logger.warning("formatted touchpoint refused; sending it plain", extra={"error": exc.message})
            await self.bot.send_message(chat_id=chat_id, text=chunk.text, reply_markup=markup)
