"""One leased inbox row while it is worked: the turn's receipt, and sending the reply it recorded.

The answer to a message is recorded on the row by the turn's own transaction (`receipt`), so a
stored answer and "this reply must be sent" commit together. Sending then goes chunk by chunk:
after Telegram accepts a chunk, the count of chunks sent is committed (the last one marks the row
done in the same statement). The one window left is between Telegram accepting a chunk and that
commit: a crash inside it sends that chunk again when the row is resumed (at least once, never
lost), and the row's `resumed_sends` counts every resumption that may have hit it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from agent.clock import Clock
from agent.errors import NikitaError
from bot.sending import split_text
from db.inbox import InboxRepository, LeasedUpdate
from db.models import InboxUpdate

logger = logging.getLogger(__name__)


class LeaseLostError(NikitaError):
    """Another worker holds the row now (this one's lease ran out); this worker stops touching it."""


@dataclass
class Delivery:
    """A row being worked: what its handler recorded, what was sent, how it ended."""

    row: LeasedUpdate
    owner: str
    sessions: async_sessionmaker[AsyncSession]
    clock: Clock
    status: str = "pending"
    reply: str | None = None
    sent: int = 0
    error: BaseException | None = None
    outcome: str = "handled"
    # The send in progress, which a graceful stop lets finish (it is the crash window).
    sending: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.status, self.reply, self.sent = self.row.status, self.row.reply_text, self.row.reply_chunks_sent

    @property
    def chat_id(self) -> int | None:
        """Where replies go."""
        return self.row.chat_id

    async def receipt(self, session: AsyncSession, answer: str) -> None:
        """The turn's receipt: record the answer on the row, in the turn's transaction."""
        if not await InboxRepository(session).record_reply(self.row.id, owner=self.owner, text=answer):
            raise LeaseLostError(f"inbox row {self.row.id} is no longer held by {self.owner}")
        # Taken as recorded once the handler returns; after a failure `reload` reads what committed.
        self.status, self.reply, self.sent = "replying", answer, 0

    async def reload(self) -> None:
        """Read the row again (after a failure: did the turn's transaction commit its reply?)."""
        async with self.sessions() as session:
            row = (
                await session.execute(
                    select(
                        InboxUpdate.status,
                        InboxUpdate.reply_text,
                        InboxUpdate.reply_chunks_sent,
                        InboxUpdate.lease_owner,
                    ).where(InboxUpdate.id == self.row.id)
                )
            ).one_or_none()
        if row is None:
            self.status = "done"  # deleted (/forget) while it was worked
            return
        status, reply, sent, owner = row
        if status != "done" and owner != self.owner:
            raise LeaseLostError(f"inbox row {self.row.id} was taken over by {owner}")
        # Chunks Telegram accepted are never sent again by this process, recorded or not.
        same_reply = status == "replying" and reply == self.reply
        self.status, self.reply, self.sent = status, reply, max(sent, self.sent) if same_reply else sent

    async def finish(self, bot: Bot) -> None:
        """Send what is left of the recorded reply, then mark the row done."""
        if self.status == "done":
            return
        if self.status == "replying" and self.reply is not None and self.chat_id is not None:
            chunks = split_text(self.reply) or ["…"]
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

    async def _send_chunk(self, bot: Bot, chunks: list[str]) -> None:
        assert self.chat_id is not None
        await bot.send_message(chat_id=self.chat_id, text=chunks[self.sent])
        self.sent += 1
        await self._record(self.sent, len(chunks))

    async def _record(self, sent: int, total: int) -> None:
        async with self.sessions() as session, session.begin():
            repo = InboxRepository(session)
            # Not waiting for the disk keeps this commit, the crash window, short; only a crash of
            # the database server itself could lose it (the chunk is then sent again).
            await repo.relax_durability()
            if sent < total:
                await repo.chunk_sent(self.row.id, sent=sent)
            else:
                await repo.finish(self.row.id, now=self.clock.now(), outcome="answered", sent=sent)
        if sent == total:
            self.status = "done"

    async def close(self, outcome: str, error: str | None = None) -> None:
        """Mark the row done without (more) sending."""
        async with self.sessions() as session, session.begin():
            repo = InboxRepository(session)
            await repo.relax_durability()
            await repo.finish(self.row.id, now=self.clock.now(), outcome=outcome, sent=self.sent, error=error)
        self.status, self.outcome = "done", outcome
