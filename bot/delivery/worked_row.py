"""One leased inbox row while it is worked: the answer its handler gives, and sending it.

A handler that answers hands the answer to the row (`answer`): the turn that produced it has
stored it already, so the row only has to send it. The answer is recorded on the row in the same
commit that counts the first chunk Telegram accepted; every further chunk's count is committed
after Telegram accepts it (the last one marks the row done in the same statement). A crash before
that first commit leaves the row pending: resumed, it runs its handler again, whose turn finds the
stored message and its answer by the Telegram id (no model call, nothing stored twice) and hands
the same answer over, marked `repeated`. The one window left is between Telegram accepting a chunk
and that chunk's commit: a crash inside it sends the chunk again when the row is resumed (at least
once, never lost), and the row's `resumed_sends` counts every resumption that may have hit it (a
resumed row with a recorded reply, or a repeated answer).

A streamed preview message (bot/delivery/edit_stream.py) that this process sent for the row becomes the
answer's first chunk by an edit, counted like a sent chunk; if Telegram refuses the edit the preview
is deleted and the chunk sent. After a crash the resumed row sends the answer fresh (the preview id
lived in this process only), leaving the preview as a partial message.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot
from telegram.error import BadRequest, TelegramError

from agent.core.clock import Clock
from agent.core.errors import LeaseLostError
from bot.delivery.formatting import Chunk, render
from bot.delivery.placement import placement
from bot.errors import NotStoredError
from db.inbox import InboxRepository, LeasedUpdate
from db.models import InboxUpdate
from db.uninterrupted import uninterrupted

logger = logging.getLogger(__name__)


@dataclass
class WorkedRow:
    """A row being worked: what its handler recorded, what was sent, how it ended."""

    row: LeasedUpdate
    holder: str
    sessions: async_sessionmaker[AsyncSession]
    clock: Clock
    status: str = "pending"
    reply: str | None = None
    sent: int = 0
    # The answer its handler gave, not on the row yet (recorded with the first chunk accepted), and
    # whether its turn found it stored before.
    unrecorded: bool = False
    repeated: bool = False
    error: BaseException | None = None
    outcome: str = "handled"
    # The send in progress, which a graceful stop lets finish (it is the crash window).
    sending: asyncio.Task[None] | None = None
    # The intake's commit of the row, when the row was handed over before it (bot/delivery/inbox.py).
    stored: asyncio.Future[bool] | None = None
    # The streamed preview message this process sent for the row, until the answer replaces it.
    preview_message_id: int | None = None
    # Until when the row is surely still this worker's (well within its lease); past it, or unknown,
    # the answer is recorded under the lease before its first chunk goes, so a worker whose lease ran
    # out while it worked sends nothing (the row's new holder sends the stored answer).
    held_until: datetime | None = None

    def __post_init__(self) -> None:
        self.status, self.reply, self.sent = self.row.status, self.row.reply_text, self.row.reply_chunks_sent

    @property
    def chat_id(self) -> int | None:
        """Where replies go."""
        return self.row.chat_id

    async def wait_stored(self) -> None:
        """Wait for the intake's commit of the row; raise NotStoredError if it did not happen."""
        if self.stored is None:
            return
        if not await asyncio.shield(self.stored):
            # Failed, or unknown (the connection broke during COMMIT, which may have succeeded):
            # the database says. A committed row is worked as usual; it is ours to finish.
            async with self.sessions() as session:
                holder = await session.scalar(
                    select(InboxUpdate.lease_holder).where(
                        InboxUpdate.id == self.row.id, InboxUpdate.update_id == self.row.update_id
                    )
                )
            if holder != self.holder:
                raise NotStoredError(f"inbox row {self.row.id} was not committed")
        self.stored = None

    def answer(self, text: str, *, repeated: bool = False) -> None:
        """The answer to send (nothing for an empty one); `repeated`: its turn found it stored
        before, so a resumed row may have sent it already."""
        if text and self.status == "pending":
            self.reply, self.sent, self.unrecorded, self.repeated = text, 0, True, repeated

    async def reload(self) -> None:
        """Read the row again (after a failure: what did the sending commit?)."""
        await self.wait_stored()
        async with self.sessions() as session:
            row = (
                await session.execute(
                    select(
                        InboxUpdate.status,
                        InboxUpdate.reply_text,
                        InboxUpdate.reply_chunks_sent,
                        InboxUpdate.lease_holder,
                    ).where(InboxUpdate.id == self.row.id)
                )
            ).one_or_none()
        if row is None:
            self.status = "done"  # deleted (/forget) while it was worked
            return
        status, reply, sent, holder = row
        if status != "done" and holder != self.holder:
            raise LeaseLostError(f"inbox row {self.row.id} was taken over by {holder}")
        if status == "pending" and self.unrecorded:
            return  # the handler's answer, known here only: still to send
        # Chunks Telegram accepted are never sent again by this process, recorded or not.
        same_reply = status == "replying" and reply == self.reply
        self.status, self.reply, self.sent = status, reply, max(sent, self.sent) if same_reply else sent

    async def finish(self, bot: Bot) -> None:
        """Send what is left of the answer, then mark the row done."""
        if self.status == "done":
            return
        await self.wait_stored()  # nothing is sent for a row the intake did not commit
        if self.reply is not None and self.chat_id is not None:
            # The model's Markdown as text + entities; the same reply always gives the same chunks.
            chunks = render(self.reply) or [Chunk("…")]
            if self.unrecorded and (self.held_until is None or self.clock.now() >= self.held_until):
                await self._record(0, len(chunks))
            while self.sent < len(chunks):
                # Shielded: a graceful stop waits for a send in progress instead of cutting it.
                self.sending = asyncio.create_task(self._send_chunk(bot, chunks))
                try:
                    await asyncio.shield(self.sending)
                finally:
                    if self.sending.done():
                        self.sending = None
            if self.status != "done":  # all with Telegram; an earlier record of it failed
                await self._record(len(chunks), len(chunks))
            self.outcome = "answered"
            return
        await self.close(self.outcome)

    async def _send_chunk(self, bot: Bot, chunks: list[Chunk]) -> None:
        assert self.chat_id is not None
        chunk = chunks[self.sent]
        if self.sent > 0 or not await self._into_preview(bot, chunk):
            where = placement(self.row.payload)
            try:
                await bot.send_message(
                    chat_id=self.chat_id, text=chunk.text, entities=chunk.entities or None, **where
                )
            except BadRequest as exc:
                if not chunk.entities:
                    raise
                # Formatting must never cost the reply: the same words without entities.
                logger.warning("formatted chunk refused; sending it plain", extra={"error": exc.message})
                await bot.send_message(chat_id=self.chat_id, text=chunk.text, **where)
        self.sent += 1
        await self._record(self.sent, len(chunks))

    async def tell(self, bot: Bot, text: str) -> None:
        """A message outside the answer (an apology, "still working"): in place of the
        preview when there is one."""
        assert self.chat_id is not None
        if not await self._into_preview(bot, Chunk(text)):
            await bot.send_message(chat_id=self.chat_id, text=text, **placement(self.row.payload))

    async def _into_preview(self, bot: Bot, chunk: Chunk) -> bool:
        """Edit the preview message into `chunk`: True when it shows it, False when there is no
        preview (any more: a refused edit deletes it). Flood control and network errors raise with
        the preview kept, so the retry edits it again."""
        message_id, chat_id = self.preview_message_id, self.chat_id
        if message_id is None or chat_id is None:
            return False
        try:
            try:
                await _edit(bot, chat_id, message_id, chunk)
            except BadRequest as exc:
                if not chunk.entities:
                    raise
                logger.warning("formatted edit refused; editing it plain", extra={"error": exc.message})
                await _edit(bot, chat_id, message_id, Chunk(chunk.text))
        except BadRequest as exc:
            logger.warning("preview could not become the answer; replaced", extra={"error": exc.message})
            self.preview_message_id = None
            with suppress(TelegramError):
                await bot.delete_message(chat_id=chat_id, message_id=message_id)
            return False
        self.preview_message_id = None
        return True

    async def _record(self, sent: int, total: int) -> None:
        await self.wait_stored()
        recorded = True
        async with self.sessions() as session, session.begin():
            repo = InboxRepository(session)
            # Not waiting for the disk keeps this commit, the crash window, short; only a crash of
            # the database server itself could lose it (the chunk is then sent again).
            await repo.relax_durability()
            if self.unrecorded:
                assert self.reply is not None
                recorded = await repo.record_sent(
                    self.row.id,
                    holder=self.holder,
                    reply=self.reply,
                    sent=sent,
                    total=total,
                    repeated=self.repeated,
                    now=self.clock.now(),
                )
                if not recorded and sent:
                    await repo.sent_unheld(self.row.id)
            elif sent < total:
                await repo.chunk_sent(self.row.id, sent=sent)
            else:
                await repo.finish(self.row.id, now=self.clock.now(), outcome="answered", sent=sent)
        if not recorded:
            # Taken over while this worker answered: the new holder sends the stored answer.
            raise LeaseLostError(f"inbox row {self.row.id} is no longer held by {self.holder}")
        self.unrecorded = False
        self.status = "done" if sent == total else "replying"

    async def close(self, outcome: str, error: str | None = None) -> None:
        """Mark the row done without (more) sending."""
        await self.wait_stored()
        await uninterrupted(self._finish(outcome, error))  # a stop waits for it (db/uninterrupted.py)
        self.status, self.outcome = "done", outcome

    async def _finish(self, outcome: str, error: str | None) -> None:
        async with self.sessions() as session, session.begin():
            repo = InboxRepository(session)
            await repo.relax_durability()
            await repo.finish(self.row.id, now=self.clock.now(), outcome=outcome, sent=self.sent, error=error)


async def _edit(bot: Bot, chat_id: int, message_id: int, chunk: Chunk) -> None:
    try:
        await bot.edit_message_text(
            chat_id=chat_id, message_id=message_id, text=chunk.text, entities=chunk.entities or None
        )
    except BadRequest as exc:
        if "not modified" not in exc.message:  # else the preview already shows exactly this
            raise
