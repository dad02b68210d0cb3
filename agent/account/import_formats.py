"""Reading another assistant's export (ChatGPT, Claude): the file, streamed, as conversations.

The export is a zip holding `conversations.json`, or that JSON alone. Either way it is read as a
stream of JSON events (ijson), one conversation built at a time, so a file of any size takes the
memory of its largest conversation (opening it safely: agent/account/import_files.py). Nothing
here touches the database; `agent/account/imports.py` stores what this yields. docs/import.md says
what is imported and what is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agent.account.import_files import ImportFileError, ReadLimits, json_items, open_json
from db.models.conversations import OTHER

__all__ = [
    "SOURCES",
    "ExportReader",
    "ImportFileError",
    "ImportedConversation",
    "ImportedMessage",
    "ReadLimits",
    "Source",
]

Source = Literal["chatgpt", "claude"]
# The assistants an export can come from, by their source name.
SOURCES: dict[str, str] = {"chatgpt": "ChatGPT", "claude": "Claude"}
# Message times outside these years are taken as missing (a corrupt or zero epoch).
_EARLIEST = datetime(1995, 1, 1, tzinfo=UTC).timestamp()
_LATEST = datetime(2200, 1, 1, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class ImportedMessage:
    """One line of an imported conversation: the person's ("user") or the other assistant's (OTHER)."""

    external_id: str
    role: str
    text: str
    sent_at: datetime


@dataclass(frozen=True)
class ImportedConversation:
    """One conversation of the export, as the path the person saw, in order."""

    external_id: str
    title: str
    messages: tuple[ImportedMessage, ...]


class ExportReader:
    """The conversations of one export file, streamed: iterate once; `source` and `skipped` fill in.

    `skipped` counts conversations with nothing to import (no messages, a ChatGPT tree whose current
    node is missing or points nowhere, no time anywhere, or an entry of neither format).
    """

    def __init__(self, path: Path, limits: ReadLimits | None = None) -> None:
        self.path = path
        self.limits = limits or ReadLimits()
        self.source: Source | None = None
        self.skipped = 0
        self.items = 0

    def __iter__(self) -> Iterator[ImportedConversation]:
        with open_json(self.path, self.limits) as stream:
            for item in json_items(stream, self.limits.max_depth):
                self.items += 1
                conversation = self._conversation(item)
                if conversation is None:
                    self.skipped += 1
                else:
                    yield conversation
        if self.source is None:
            if self.items == 0:
                raise ImportFileError("The export holds no conversations.")
            raise ImportFileError("This file is neither a ChatGPT nor a Claude export.")

    def _conversation(self, item: Any) -> ImportedConversation | None:
        kind = _kind_of(item)
        if kind is None or (self.source is not None and kind != self.source):
            if self.source is None and self.items >= 3:
                # The first entries are of neither format: not an export of either assistant.
                raise ImportFileError("This file is neither a ChatGPT nor a Claude export.")
            return None
        self.source = kind
        return _chatgpt(item) if kind == "chatgpt" else _claude(item)


def _kind_of(item: Any) -> Source | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("mapping"), dict):
        return "chatgpt"
    if isinstance(item.get("chat_messages"), list):
        return "claude"
    return None


# --- the two formats ----------------------------------------------------------------------------------


def _epoch(value: Any) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or not _EARLIEST <= value <= _LATEST:
        return None
    return datetime.fromtimestamp(value, UTC)


def _iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    at = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return at if _EARLIEST <= at.timestamp() <= _LATEST else None


def _dated(
    conversation_id: Any,
    title: Any,
    lines: list[tuple[str, str, str, datetime | None]],
    fallback: datetime | None,
) -> ImportedConversation | None:
    """The conversation with every line dated: a line with no time takes the one before it (the first
    ones, the first time after them; none at all, the conversation's own); None when nothing is left."""
    if not isinstance(conversation_id, str) or not conversation_id or not lines:
        return None
    known = [at for *_, at in lines if at is not None]
    previous = known[0] if known else fallback
    if previous is None:
        return None
    messages = []
    for external_id, role, text, at in lines:
        previous = at or previous
        messages.append(ImportedMessage(external_id=external_id, role=role, text=text, sent_at=previous))
    name = title.strip() if isinstance(title, str) else ""
    return ImportedConversation(external_id=conversation_id, title=name[:200], messages=tuple(messages))


def _chatgpt_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if not isinstance(content, dict) or content.get("content_type") not in ("text", "multimodal_text"):
        return ""  # code, execution output, browsing, reasoning: the assistant's tools, not the talk
    parts = content.get("parts")
    texts: list[str] = []
    for part in parts if isinstance(parts, list) else ():
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("content_type") == "audio_transcription":
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
        # Anything else (image and file asset pointers) is not text.
    return "\n".join(texts).strip()


def _hidden(message: dict[str, Any]) -> bool:
    metadata = message.get("metadata")
    if not isinstance(metadata, dict):
        return False
    return bool(
        metadata.get("is_visually_hidden_from_conversation") or metadata.get("is_user_system_message")
    )


def _chatgpt(item: dict[str, Any]) -> ImportedConversation | None:
    """The path from `current_node` back through `parent` links; other branches are not the conversation."""
    mapping: dict[str, Any] = item["mapping"]
    node_id = item.get("current_node")
    if not isinstance(node_id, str) or not isinstance(mapping.get(node_id), dict):
        return None
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    # A parent missing from the mapping ends the path there; a cycle ends it where it closes.
    while isinstance(node_id, str) and node_id not in seen and isinstance(mapping.get(node_id), dict):
        seen.add(node_id)
        node = mapping[node_id]
        path.append(node)
        node_id = node.get("parent")
    lines: list[tuple[str, str, str, datetime | None]] = []
    for node in reversed(path):
        message = node.get("message")
        if not isinstance(message, dict) or _hidden(message):
            continue
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        if role not in ("user", "assistant") or message.get("recipient", "all") != "all":
            continue  # system and tool lines, and the assistant's calls to its tools
        text = _chatgpt_text(message)
        if not text:
            continue
        external_id = message.get("id") if isinstance(message.get("id"), str) else node.get("id")
        lines.append(
            (str(external_id), "user" if role == "user" else OTHER, text, _epoch(message.get("create_time")))
        )
    fallback = _epoch(item.get("create_time")) or _epoch(item.get("update_time"))
    return _dated(item.get("id") or item.get("conversation_id"), item.get("title"), lines, fallback)


def _claude_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list) and content:
        parts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        ]
        return "\n".join(parts).strip()  # tool_use and tool_result blocks are not the talk
    text = message.get("text")
    return text.strip() if isinstance(text, str) else ""


def _claude(item: dict[str, Any]) -> ImportedConversation | None:
    lines: list[tuple[str, str, str, datetime | None]] = []
    for index, message in enumerate(item["chat_messages"]):
        if not isinstance(message, dict) or message.get("sender") not in ("human", "assistant"):
            continue
        text = _claude_text(message)
        if not text:
            continue
        external_id = message.get("uuid") if isinstance(message.get("uuid"), str) else str(index)
        role = "user" if message["sender"] == "human" else OTHER
        lines.append((str(external_id), role, text, _iso(message.get("created_at"))))
    fallback = _iso(item.get("created_at")) or _iso(item.get("updated_at"))
    return _dated(item.get("uuid"), item.get("name"), lines, fallback)
