"""Long polling that confirms updates to Telegram only after the inbox committed them.

Telegram forgets every update below the `offset` of the next getUpdates call. python-telegram-bot's
Updater moves the offset as soon as a batch is on its in-memory queue (and once more when it
stops), before any handler ran, so a crash or a restart lost what was queued; it cannot wait for a
commit. This loop asks with offset = last + 1 only after the batch's commit; a failed commit leaves
the offset where it was and Telegram sends the same updates again (the inbox ignores repeats by
update_id).

The batch is read as JSON and each update parsed on its own, as the webhook does: PTB's
`Bot.get_updates` parses the whole batch at once, so one update it cannot read (a date past year
9999, say) would fail every retry of the batch and stop everyone's messages. Here that update is
stored dead with its reason and the offset moves past it.

The first call does not wait: it takes what was waiting when the process started, and `caught_up`
is set once that batch is in the inbox (the start-up work waits for it, bot/app.py).
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from telegram import Bot
from telegram.error import TelegramError

from bot.delivery.inbox import UpdateInbox, parse_update
from bot.errors import NotAnUpdateError
from db.transient import Backoff

logger = logging.getLogger(__name__)

# Extra time on top of the long-poll timeout before the HTTP read gives up.
READ_MARGIN = 10.0


class Poller:
    """getUpdates in a loop: fetch a batch, commit it to the inbox, then confirm it."""

    def __init__(self, bot: Bot, inbox: UpdateInbox, *, timeout: int, allowed_updates: list[str]) -> None:
        self.bot = bot
        self.inbox = inbox
        self.timeout = timeout
        self.allowed_updates = allowed_updates
        self.offset: int | None = None
        self.caught_up = asyncio.Event()  # the first batch (the updates waiting at start) is stored
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Poll in the background until `stop`."""
        self._task = asyncio.create_task(self._run(), name="telegram-polling")

    async def stop(self) -> None:
        """Stop polling (a long poll in flight is abandoned: nothing of it was confirmed)."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._confirm()

    async def _run(self) -> None:
        # Polling and a webhook exclude each other; a webhook left from webhook mode would make
        # every getUpdates fail with 409. Its pending updates stay with Telegram for us.
        await self._retrying(lambda: self.bot.delete_webhook(drop_pending_updates=False))
        backoff = Backoff(total=float("inf"), cap=10.0)
        while True:
            try:
                await self.poll_once(long_poll=None if self.caught_up.is_set() else 0)
                self.caught_up.set()
                backoff = Backoff(total=float("inf"), cap=10.0)
            except (TelegramError, SQLAlchemyError, OSError) as exc:
                delay = backoff.next_delay() or 1.0
                logger.warning("polling failed", extra={"error": repr(exc), "delay": round(delay, 2)})
                await asyncio.sleep(delay)

    async def poll_once(self, *, long_poll: int | None = None) -> int:
        """One getUpdates call (waiting `long_poll` seconds, `self.timeout` unless given) and the
        commit of its batch; returns how many updates came."""
        wait = self.timeout if long_poll is None else long_poll
        # PTB's own request path (its timeouts, retries and errors) without its parsing of the batch.
        payloads: Any = await self.bot._post(  # the one public way parses the batch
            "getUpdates",
            {"offset": self.offset, "timeout": wait, "allowed_updates": self.allowed_updates},
            read_timeout=wait + READ_MARGIN,
        )
        if not isinstance(payloads, list) or not payloads:
            return 0
        rows, last = [], None
        for payload in payloads:
            try:
                rows.append(parse_update(payload))
            except NotAnUpdateError as exc:  # no update_id to store it under, nor to move past
                logger.warning("polled item is not an update", extra={"error": str(exc)})
                continue
            last = payload["update_id"] if last is None else max(last, payload["update_id"])
        if rows:
            await self.inbox.receive(rows)  # raises: the offset stays put
        if last is not None:
            self.offset = last + 1
        return len(rows)

    async def _confirm(self) -> None:
        # Tell Telegram about the last committed batch now, so a restart does not fetch it again
        # (harmless if it did: the inbox ignores repeats).
        if self.offset is None:
            return
        with suppress(TelegramError):
            await self.bot.get_updates(offset=self.offset, timeout=0, limit=1)

    async def _retrying(self, call: Any) -> None:
        backoff = Backoff(total=float("inf"), cap=10.0)
        while True:
            try:
                await call()
                return
            except TelegramError as exc:
                delay = backoff.next_delay() or 1.0
                logger.warning("Telegram call failed", extra={"error": repr(exc), "delay": round(delay, 2)})
                await asyncio.sleep(delay)
