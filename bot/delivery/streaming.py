"""Streaming a reply into a private chat with Telegram's draft messages (sendMessageDraft).

A draft is an ephemeral preview: the final answer still goes through the inbox's recorded-reply
path (bot/delivery/worked_row.py), so a resumed delivery never duplicates anything a draft showed. Drafts
are sent from a background task at most every `interval` seconds with the newest text, so a slow
Telegram never slows the model down. Every draft carries the stop button (bot/delivery/stops.py);
while a tool runs, what it does is shown as a thinking block (sendRichMessageDraft) until Telegram
refuses rich drafts, then as plain draft text. RetryAfter waits as long as Telegram asks; a BadRequest (a
server without drafts, a refused entity) stops the drafts for this turn and, with
STREAM_EDIT_FALLBACK, hands the preview to an `EditStream` (send, then edit; bot/delivery/edit_stream.py),
which groups use from the start; other errors skip one update. Nothing here can fail the turn.
"""

from __future__ import annotations

import contextlib
import html
import logging
from collections.abc import AsyncIterator

from pydantic_ai import CancellationToken
from telegram import Bot, Message
from telegram.constants import ChatType
from telegram.error import BadRequest, InvalidToken

from agent.core.settings import Settings
from bot.delivery.edit_stream import GROUP_INTERVAL, EditStream
from bot.delivery.formatting import Chunk
from bot.delivery.placement import placement
from bot.delivery.preview import Activity, LivePreview
from bot.delivery.stops import Stops
from bot.delivery.worked_row import WorkedRow

logger = logging.getLogger(__name__)


class DraftStream(LivePreview):
    """A `TurnProgress` that shows the answer as a growing draft in one private chat."""

    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        draft_id: int,
        *,
        interval: float,
        fallback: EditStream | None = None,
        cancellation: CancellationToken | None = None,
    ) -> None:
        super().__init__(bot, chat_id, interval=interval)
        self.draft_id = draft_id
        self.cancellation = cancellation  # with it, every draft shows the stop button
        self.rich = True  # tool activity as a thinking block (sendRichMessageDraft) until refused
        # Shows the preview instead once Telegram refuses drafts (None: no preview then).
        self.fallback, self.fell_back = fallback, False
        self.sent = 0  # drafts Telegram accepted

    def show(self, latest: Chunk | str) -> None:
        """Show `latest` as the next draft, or through the fallback once drafts were refused."""
        if self.fell_back and self.fallback is not None:
            self.fallback.show(latest)
        else:
            super().show(latest)

    async def _put(self, chunk: Chunk) -> None:
        # Bot API 10.3, newer than python-telegram-bot: the stop button (what was written stays).
        stoppable = {"can_stop": True, "keep_on_stop": True} if self.cancellation is not None else None
        if isinstance(chunk, Activity) and self.rich:
            try:
                await self._think(chunk, stoppable or {})
                self.sent += 1
                return
            except (BadRequest, InvalidToken) as exc:  # an older server or client: plain drafts then
                self.rich = False
                logger.info("rich drafts refused; tool activity shown as text", extra={"error": str(exc)})
        await self.bot.send_message_draft(
            chat_id=self.chat_id,
            draft_id=self.draft_id,
            text=chunk.text,
            entities=chunk.entities or None,
            api_kwargs=stoppable,
        )
        self.sent += 1

    async def _think(self, activity: Activity, stoppable: dict[str, bool]) -> None:
        # Bot API 10.1, newer than python-telegram-bot: a rich draft whose one block is a thinking block.
        rich = {"html": f"<tg-thinking>{html.escape(activity.text)}</tg-thinking>"}
        fields = {"chat_id": self.chat_id, "draft_id": self.draft_id, "rich_message": rich, **stoppable}
        await self.bot.do_api_request("sendRichMessageDraft", api_kwargs=fields)

    def _refused(self, exc: BadRequest, chunk: Chunk) -> bool:
        logger.info("drafts refused for this turn", extra={"error": exc.message})
        if self.fallback is not None and self._latest is not None:
            self.fell_back = True
            self.fallback.show(self._latest)
        return False

    async def close(self) -> None:
        """Stop previewing (the turn is over; the final message follows through the inbox)."""
        await super().close()
        if self.fallback is not None:
            await self.fallback.close()


@contextlib.asynccontextmanager
async def preview(
    bot: Bot, message: Message, settings: Settings, delivery: WorkedRow, stops: Stops | None = None
) -> AsyncIterator[LivePreview | None]:
    """The live preview of the answer to `message`: drafts in a private chat, falling back to send
    then edit (STREAM_EDIT_FALLBACK), which groups use directly. The preview message, if one was
    sent, is handed to `delivery`, whose reply turns it into the answer. With `stops`, drafts offer
    the stop button, which cancels the turn (bot/delivery/stops.py)."""
    private, fallback = message.chat.type == ChatType.PRIVATE, settings.stream_edit_fallback
    # Drafts are private-only: a group's preview is a message sent, then edited (STREAM_EDIT_FALLBACK).
    if not settings.stream_replies or not (private or fallback):
        yield None
        return
    interval = settings.stream_interval_seconds
    # A retried turn edits the preview its failed try left, if any, instead of sending another.
    edits = (
        EditStream(
            bot,
            message.chat_id,
            interval=interval if private else max(interval, GROUP_INTERVAL),
            message_id=delivery.preview_message_id,
            where=placement(delivery.row.payload),
        )
        if fallback
        else None
    )
    async with contextlib.AsyncExitStack() as stack:
        token = (
            await stack.enter_async_context(stops.watch(message.chat_id, message.message_id))
            if stops is not None and private
            else None
        )
        stream: LivePreview | None = (
            DraftStream(
                bot,
                message.chat_id,
                message.message_id,
                interval=interval,
                fallback=edits,
                cancellation=token,
            )
            if private
            else edits
        )
        assert stream is not None
        try:
            yield stream
        finally:
            await stream.close()  # a draft stream closes its fallback too
            if edits is not None:
                delivery.preview_message_id = edits.message_id
