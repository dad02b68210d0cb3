"""Chunks of contiguous messages for embeddings, each knowing its message ids."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class ChunkMessage:
    """What chunking needs to know about one stored message."""

    id: int
    day_segment_id: int | None
    content: str
    sent_at: datetime
    tokens: int
    # Who said it ("Anna", "Nikita"): questions name people in the third person, turns say "I".
    speaker: str = ""


@dataclass(frozen=True)
class Chunk:
    """A run of contiguous messages of one day, and the sections it is embedded in."""

    day_segment_id: int | None
    message_ids: list[int]
    # Half-open index ranges into message_ids; each fits the embedding model's input.
    sections: list[tuple[int, int]]
    section_texts: list[str]
    token_count: int
    last_sent_at: datetime
    # False for the last chunk while its day may still grow: the next indexing pass rebuilds it.
    complete: bool = True


def _sections(messages: Sequence[ChunkMessage], budget: int, overlap: int = 0) -> list[tuple[int, int]]:
    """Consecutive groups under `budget` tokens (a longer message stands alone), each repeating
    up to `overlap` messages of the previous one, so every message also has context on both sides."""
    sections: list[tuple[int, int]] = []
    start = 0
    while start < len(messages):
        end, tokens = start, 0
        while end < len(messages) and (end == start or tokens + messages[end].tokens <= budget):
            tokens += messages[end].tokens
            end += 1
        sections.append((start, end))
        if end >= len(messages):
            break
        start = max(start + 1, end - overlap)
    return sections


def labelled(message: ChunkMessage) -> str:
    """The message as embedded: "<speaker>: <text>" when the speaker is known."""
    return f"{message.speaker}: {message.content}" if message.speaker else message.content


def _make(messages: Sequence[ChunkMessage], section_tokens: int, complete: bool, overlap: int) -> Chunk:
    sections = _sections(messages, section_tokens, overlap)
    return Chunk(
        day_segment_id=messages[0].day_segment_id,
        message_ids=[m.id for m in messages],
        sections=sections,
        section_texts=["\n".join(labelled(m) for m in messages[a:b]) for a, b in sections],
        token_count=sum(m.tokens for m in messages),
        last_sent_at=max(m.sent_at for m in messages),
        complete=complete,
    )


def build_chunks(
    messages: Sequence[ChunkMessage],
    *,
    target_tokens: int,
    max_tokens: int,
    overlap: int,
    section_tokens: int,
    section_overlap: int = 0,
) -> list[Chunk]:
    """Group messages (oldest first) into chunks that never cross a day and overlap by `overlap` messages.

    A chunk closes once it reaches `target_tokens`, or before a message would push it past
    `max_tokens`. The final chunk is marked incomplete: the next indexing pass rebuilds it.
    """
    chunks: list[Chunk] = []
    start = 0
    while start < len(messages):
        day = messages[start].day_segment_id
        end, tokens = start, 0
        while end < len(messages) and messages[end].day_segment_id == day:
            if end > start and tokens + messages[end].tokens > max_tokens:
                break
            tokens += messages[end].tokens
            end += 1
            if tokens >= target_tokens:
                break
        run = messages[start:end]
        day_over = end < len(messages) and messages[end].day_segment_id != day
        full = tokens >= target_tokens or (end < len(messages) and not day_over)
        chunks.append(_make(run, section_tokens, full or day_over, section_overlap))
        if end >= len(messages):
            break
        # The next chunk repeats the tail of this one, unless the day changed (no overlap across days).
        start = end if day_over else max(start + 1, end - overlap)
    return chunks


def split_text(text: str, budget: int, count: Callable[[str], int]) -> list[str]:
    """Split a long text (a day summary) into paragraphs groups of at most `budget` tokens."""
    parts: list[str] = []
    current: list[str] = []
    tokens = 0
    for paragraph in (p.strip() for p in text.split("\n\n")):
        if not paragraph:
            continue
        size = count(paragraph)
        if current and tokens + size > budget:
            parts.append("\n\n".join(current))
            current, tokens = [], 0
        current.append(paragraph)
        tokens += size
    if current:
        parts.append("\n\n".join(current))
    return parts or [text]
