"""Sending text to Telegram: split at its 4096-character limit, plain text so markup never fails;
and the pace into a group chat, which Telegram allows about 20 messages a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import unicodedata
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

from telegram import Bot, CallbackQuery
from telegram.constants import ChatAction, MessageLimit
from telegram.error import BadRequest, TelegramError
from telegram.ext import BaseRateLimiter

LIMIT = int(MessageLimit.MAX_TEXT_LENGTH)
# Where a cut reads best, in order of preference: paragraph, line, sentence, word.
BOUNDARIES = ("\n\n", "\n", ". ", "! ", "? ", "; ", ", ", " ")


def split_text(text: str, limit: int = LIMIT) -> list[str]:
    """Cut text into chunks of at most `limit` characters at the most natural boundary available.

    Joining the chunks gives the original text back, apart from whitespace at the cuts. Empty or
    whitespace-only text gives no chunks.
    """
    chunks: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        cut = _cut_point(rest, limit)
        chunk, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if chunk:
            chunks.append(chunk)
    if rest:
        chunks.append(rest)
    return chunks


def _cut_point(text: str, limit: int) -> int:
    window = text[:limit]
    for boundary in BOUNDARIES:
        at = window.rfind(boundary)
        # A cut in the first half would leave tiny messages; try a weaker boundary instead.
        if at >= limit // 2:
            return at + len(boundary.rstrip()) if boundary.strip() else at + len(boundary)
    cut = limit
    # No boundary at all (one huge word): cut hard, but keep combining marks with their base character.
    while cut > 1 and _is_combining(text[cut]):
        cut -= 1
    return cut


def _is_combining(char: str) -> bool:
    return unicodedata.combining(char) != 0 or char in "\u200d\ufe0f"


async def send_text(bot: Bot, chat_id: int, text: str) -> int:
    """Send text as one or more plain messages (no parse_mode); return how many were sent."""
    chunks = split_text(text) or ["…"]
    for chunk in chunks:
        await bot.send_message(chat_id=chat_id, text=chunk)
    return len(chunks)


@contextlib.asynccontextmanager
async def typing(bot: Bot, chat_id: int, *, every: float = 4.0) -> AsyncIterator[None]:
    """Show "typing…" in the chat while the body runs (Telegram shows it for about 5 seconds)."""

    async def keep_typing() -> None:
        while True:
            # A failed chat action must never fail the reply it decorates.
            with contextlib.suppress(TelegramError):
                await bot.send_chat_action(chat_id=chat_id, action=ChatAction.TYPING)
            await asyncio.sleep(every)

    task = asyncio.create_task(keep_typing())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# The Bot API methods that put a new message into a chat (a chat action or an edit does not).
_NOT_MESSAGES = frozenset({"sendChatAction", "sendMessageDraft"})
PACE_WINDOW = 60.0


class GroupPace(BaseRateLimiter[None]):
    """At most `per_minute` new messages from the bot into one group chat in any 60 seconds.

    Every Bot API call passes through here (python-telegram-bot's rate-limiter hook), so every
    sender (answers, previews, commands, touchpoints) keeps the pace without knowing about it. A
    message that would be one too many waits for its turn, in order, rather than being dropped;
    only group chats (negative ids) are paced, so a private chat never waits behind a group. A 429
    still reaches the caller, whose RetryAfter handling waits as long as Telegram asks. The pace is
    per process: Telegram's own 429s cover the rare moment two instances answer one group at once.
    """

    def __init__(
        self,
        per_minute: int = 20,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self.sleep = sleep
        self._sent: dict[int, deque[float]] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def initialize(self) -> None:
        """Nothing to set up."""

    async def shutdown(self) -> None:
        """Nothing to release."""

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, bool | dict[str, Any] | list[dict[str, Any]]]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: None,
    ) -> bool | dict[str, Any] | list[dict[str, Any]]:
        """Make the call, after waiting for the group's pace when it is a new message into a group."""
        chat_id = _group_chat(endpoint, data) if self.per_minute > 0 else None
        if chat_id is not None:
            await self.wait_turn(chat_id)
        return await callback(*args, **kwargs)

    async def wait_turn(self, chat_id: int) -> None:
        """Return when one more message may go into this chat, and count it as sent."""
        lock = self._locks.setdefault(chat_id, asyncio.Lock())
        async with lock:  # one waiter at a time per chat keeps the group's messages in order
            sent = self._sent.setdefault(chat_id, deque())
            while True:
                now = self.clock()
                while sent and now - sent[0] >= PACE_WINDOW:
                    sent.popleft()
                if len(sent) < self.per_minute:
                    sent.append(now)
                    return
                await self.sleep(sent[0] + PACE_WINDOW - now)


def _group_chat(endpoint: str, data: dict[str, Any]) -> int | None:
    if not endpoint.startswith("send") or endpoint in _NOT_MESSAGES:
        return None
    try:
        chat_id = int(data.get("chat_id", 0))
    except (TypeError, ValueError):
        return None  # a channel's @username: not a group this bot answers in
    return chat_id if chat_id < 0 else None


async def drop_buttons(query: CallbackQuery) -> None:
    """Take the buttons off the pressed message; already off (pressed twice, or by two members of a
    group at once: Telegram answers "message is not modified"), it stays so."""
    try:
        await query.edit_message_reply_markup(reply_markup=None)
    except BadRequest as exc:
        if "not modified" not in exc.message:
            raise
