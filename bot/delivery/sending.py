"""Sending text to Telegram: split at its 4096-character limit, plain text so markup never fails."""

from __future__ import annotations

import asyncio
import contextlib
import unicodedata
from collections.abc import AsyncIterator

from telegram import Bot
from telegram.constants import ChatAction, MessageLimit
from telegram.error import TelegramError

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
