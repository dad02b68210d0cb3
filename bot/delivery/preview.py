"""The live preview of an answer while the model writes it: what drafts and edits have in common.

A `LivePreview` is a `TurnProgress`: the newest text (or a tool's status) is shown from a background
task at most every `interval` seconds, so a slow Telegram never slows the model down. RetryAfter
waits as long as Telegram asks; a BadRequest goes to the subclass (by default the preview stops);
other errors skip one update. A call in flight when the turn ends is let finish, so no late update
overtakes the answer. Nothing here can fail the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import timedelta

from pydantic_ai import CancellationToken
from telegram import Bot
from telegram.error import BadRequest, RetryAfter, TelegramError

from bot.delivery.formatting import Chunk, render

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Activity(Chunk):
    """What a tool is doing, in the person's words, shown in place of the text while it runs (a
    thinking block where drafts are rich); never part of the answer."""


def retry_seconds(exc: RetryAfter) -> float:
    """How long Telegram asked to wait (PTB gives an int or a timedelta)."""
    delay = exc.retry_after
    return delay.total_seconds() if isinstance(delay, timedelta) else float(delay)


def last_chunk(text: str) -> Chunk | None:
    """The last message's worth of `text`, formatted like the final message."""
    chunks = render(text)
    return chunks[-1] if chunks else None


class LivePreview:
    """Shows the newest text with `_put` (one Telegram call), throttled, in one chat."""

    def __init__(self, bot: Bot, chat_id: int, *, interval: float) -> None:
        self.bot, self.chat_id, self.interval = bot, chat_id, interval
        self._latest: Chunk | str | None = None
        self._shown: Chunk | None = None
        self._wake = asyncio.Event()
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._call: asyncio.Task[None] | None = None
        # Set where the person can stop the answer (drafts' stop button).
        self.cancellation: CancellationToken | None = None

    async def text(self, so_far: str) -> None:
        """The answer so far: its last message's worth, formatted, is shown."""
        if so_far.strip():
            # Formatting waits for the call: one render per update, not one per token.
            self.show(so_far)

    async def tool(self, name: str, doing: str) -> None:
        """A tool runs: what it is doing, in place of the text."""
        self.show(Activity(doing))

    def show(self, latest: Chunk | str) -> None:
        """Show `latest` (the raw answer so far, or a ready chunk) with the next call."""
        if self._stopped or (self.cancellation is not None and self.cancellation.cancelled):
            return  # over, or stopped by the person: Telegram shows no more drafts
        self._latest = latest
        self._wake.set()
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"preview-{self.chat_id}")

    async def _put(self, chunk: Chunk) -> None:
        """Show `chunk` (one Telegram call)."""
        raise NotImplementedError

    def _refused(self, exc: BadRequest, chunk: Chunk) -> bool:
        """Telegram refused `chunk`: True to go on previewing, False to stop."""
        logger.info("preview refused; it stops for this turn", extra={"error": exc.message})
        return False

    async def _run(self) -> None:
        while not self._stopped:
            await self._wake.wait()
            self._wake.clear()
            latest = self._latest
            chunk = last_chunk(latest) if isinstance(latest, str) else latest
            if chunk is None or chunk == self._shown:
                continue
            self._call = asyncio.create_task(self._put(chunk))
            try:
                await asyncio.shield(self._call)
                self._shown = chunk
            except RetryAfter as exc:
                await asyncio.sleep(retry_seconds(exc))
                self._wake.set()
                continue
            except BadRequest as exc:
                if not self._refused(exc, chunk):
                    self._stopped = True
                    return
            except TelegramError as exc:
                logger.debug("preview not updated", extra={"error": repr(exc)})
            await asyncio.sleep(self.interval)

    async def close(self) -> None:
        """Stop previewing (the turn is over; the answer follows through the inbox)."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._call is not None:
            with contextlib.suppress(TelegramError, asyncio.CancelledError):
                await self._call
