"""Markdown from the model -> Telegram messages: plain text plus entities, cut at the length limit.

The model writes ordinary Markdown. telegramify-markdown turns it into text and `MessageEntity`
offsets (UTF-16 code units, as Telegram counts), so nothing is escaped by hand and no parse_mode can
be rejected. Long replies are cut at the best boundary that lies outside every entity; only a single
entity longer than a message (a huge code block) is cut inside, and then each part keeps a valid
entity of its own. The same reply always gives the same chunks, so a resumed delivery
counts the chunks it already sent correctly.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import telegramify_markdown
from telegram import MessageEntity

from bot.delivery.sending import BOUNDARIES, LIMIT, split_text

logger = logging.getLogger(__name__)

# Entity types we never send: custom emoji need a paid username, mentions of users need ids we do not
# have. Their text stays.
_DROPPED = frozenset({"custom_emoji", "text_mention"})


@dataclass(frozen=True)
class Chunk:
    """One Telegram message: its text and the entities inside it (offsets relative to this text)."""

    text: str
    entities: tuple[MessageEntity, ...] = ()


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's entity offsets and length limit."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def render(markdown: str, limit: int = LIMIT) -> list[Chunk]:
    """Markdown -> the messages to send; plain-text chunks when the converter cannot parse it."""
    if not markdown.strip():
        return []
    try:
        text, raw = telegramify_markdown.convert(markdown)
    except Exception:  # a third-party parser on model output: any failure means "send it plain"
        logger.exception("markdown conversion failed; sending plain text")
        return plain(markdown, limit)
    entities = [
        MessageEntity(type=e.type, offset=e.offset, length=e.length, url=e.url, language=e.language or None)
        for e in raw
        if e.type not in _DROPPED and e.length > 0
    ]
    return split(text, entities, limit)


def plain(text: str, limit: int = LIMIT) -> list[Chunk]:
    """Text as it is, no entities, cut at natural boundaries."""
    return [Chunk(part) for part in split_text(text, limit)]


def split(text: str, entities: list[MessageEntity], limit: int = LIMIT) -> list[Chunk]:
    """Cut text with entities into chunks of at most `limit` UTF-16 units, entities kept whole."""
    # Work in UTF-16 units throughout: Telegram's offsets and its limit are both counted in them.
    units = text.encode("utf-16-le", "surrogatepass")
    size = len(units) // 2
    chunks: list[Chunk] = []
    start = 0
    while start < size:
        start = _skip_space(units, start, size)
        if start >= size:
            break
        end = size if size - start <= limit else _cut(units, start, limit, entities)
        chunk = _chunk(units, start, _trim_space(units, start, end), entities)
        if chunk.text:
            chunks.append(chunk)
        start = end
    return chunks


def _char(units: bytes, at: int) -> str:
    return units[2 * at : 2 * at + 2].decode("utf-16-le", "surrogatepass")


def _skip_space(units: bytes, at: int, size: int) -> int:
    while at < size and _char(units, at).isspace():
        at += 1
    return at


def _trim_space(units: bytes, start: int, end: int) -> int:
    while end > start and _char(units, end - 1).isspace():
        end -= 1
    return end


def _is_low_surrogate(units: bytes, at: int) -> bool:
    return 0xDC00 <= int.from_bytes(units[2 * at : 2 * at + 2], "little") <= 0xDFFF


def _inside(entities: list[MessageEntity], at: int) -> bool:
    return any(e.offset < at < e.offset + e.length for e in entities)


def _cut(units: bytes, start: int, limit: int, entities: list[MessageEntity]) -> int:
    window = units[2 * start : 2 * (start + limit)].decode("utf-16-le", "surrogatepass")
    for keep_entities in (True, False):
        for boundary in BOUNDARIES:
            at = len(window)
            while (at := window.rfind(boundary, 0, at)) >= limit // 4:
                cut = start + utf16_len(window[:at]) + len(boundary)
                if not keep_entities or not _inside(entities, cut):
                    return cut
    cut = start + limit
    # No boundary at all: cut hard, but never between the two halves of a surrogate pair.
    while _is_low_surrogate(units, cut):
        cut -= 1
    return cut


def _chunk(units: bytes, start: int, end: int, entities: list[MessageEntity]) -> Chunk:
    text = units[2 * start : 2 * end].decode("utf-16-le", "surrogatepass")
    inside: list[MessageEntity] = []
    for e in entities:
        # An entity cut by the chunk's edges is clipped: each part is a valid entity of its own.
        lo, hi = max(e.offset, start), min(e.offset + e.length, end)
        if hi > lo:
            inside.append(
                MessageEntity(type=e.type, offset=lo - start, length=hi - lo, url=e.url, language=e.language)
            )
    return Chunk(text, tuple(inside))
