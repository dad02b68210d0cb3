"""What the fake Bot API records: calls, sent messages and documents."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class ApiCall:
    """One Bot API request as the fake received it (JSON-typed params decoded)."""

    method: str
    params: Json


@dataclass(frozen=True)
class SentMessage:
    """One accepted sendMessage call."""

    chat_id: int | str
    text: str
    parse_mode: str | None
    message_id: int
    params: Json
    # When the fake accepted it (time.monotonic), for reply latencies.
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class SentDocument:
    """One accepted sendDocument call; content is empty when a file_id or URL was sent instead of bytes."""

    chat_id: int | str
    filename: str | None
    content: bytes
    mime_type: str | None
    caption: str | None
    message_id: int


@dataclass(frozen=True)
class SentDraft:
    """One accepted sendMessageDraft call (a streamed preview; never a message in the chat)."""

    chat_id: int
    draft_id: int
    text: str
    entities: list[Json]
    at: float = field(default_factory=time.monotonic)
    # The user sees a button that stops further drafts; with keep_on_stop the draft stays shown.
    can_stop: bool = False
    keep_on_stop: bool = False
    # sendRichMessageDraft's InputRichMessage (`text` is then its visible text); None for sendMessageDraft.
    rich: Json | None = None


@dataclass(frozen=True)
class SentEdit:
    """One accepted editMessageText call (of a message the bot sent)."""

    chat_id: int | str
    message_id: int
    text: str
    entities: list[Json]
    at: float = field(default_factory=time.monotonic)
