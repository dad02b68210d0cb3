"""Streaming where drafts are not available: send one preview message, then edit it (throttled).

Used in group chats (drafts are private-only) and when Telegram refuses drafts in a private chat.
The preview is a real message, so the final answer replaces it instead of arriving beside it: the
reply sender (bot/delivery/worked_row.py) edits the preview into the answer's first chunk, counted
exactly like a sent chunk, so the delivery guarantee still holds. Edits go out at most every
`interval` seconds (at least 1 s; groups 3 s, Telegram allows ~20 messages a minute there);
"message is not modified" is skipped, another BadRequest stops the preview.
"""

from __future__ import annotations

from typing import Any

from telegram import Bot
from telegram.error import BadRequest

from bot.delivery.formatting import Chunk
from bot.delivery.preview import LivePreview

MIN_INTERVAL = 1.0  # seconds between edits in a private chat
GROUP_INTERVAL = 3.0  # seconds between edits in a group (~20 messages a minute per group)


class EditStream(LivePreview):
    """A `TurnProgress` that shows the answer in one message it sends, then edits."""

    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        *,
        interval: float,
        message_id: int | None = None,
        where: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(bot, chat_id, interval=max(interval, MIN_INTERVAL))
        # In a group: the reply to the addressed message, in its topic (bot/delivery/placement.py).
        self.where = where or {}
        # The preview message, once Telegram accepted it (or an earlier try's, edited again).
        self.message_id = message_id
        self.edits = 0  # edits Telegram accepted

    async def _put(self, chunk: Chunk) -> None:
        entities = chunk.entities or None
        if self.message_id is None:
            sent = await self.bot.send_message(
                chat_id=self.chat_id, text=chunk.text, entities=entities, **self.where
            )
            self.message_id = sent.message_id
            return
        await self.bot.edit_message_text(
            chat_id=self.chat_id, message_id=self.message_id, text=chunk.text, entities=entities
        )
        self.edits += 1

    def _refused(self, exc: BadRequest, chunk: Chunk) -> bool:
        # The same text twice (e.g. a status shown again) is harmless.
        return "not modified" in exc.message or super()._refused(exc, chunk)
