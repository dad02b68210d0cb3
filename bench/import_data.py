"""Generated exports of ChatGPT and Claude in their own formats, for bench import and the tests.

Each conversation alternates the person and the assistant, one line a minute, conversations a few
hours apart. A ChatGPT conversation also holds what its export holds besides the path the person
saw: a hidden system node, a regenerated answer on another branch (its text says "regenerated"),
and a tool's line; none of them is imported. Words are drawn from a made-up vocabulary, so the text
compresses about as well as real chat does.
"""

from __future__ import annotations

import json
import random
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

Format = Literal["chatgpt", "claude"]
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sa", "do", "gu", "hi", "ba", "fe", "yo"]


@dataclass(frozen=True)
class ExportShape:
    """How big a generated export is."""

    conversations: int
    messages_per_conversation: int
    # Words per line, on average.
    words: int = 14
    seed: int = 7


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    return ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(size)]


def _lines(shape: ExportShape, index: int, vocabulary: list[str], rng: random.Random) -> Iterator[str]:
    for line in range(shape.messages_per_conversation):
        count = max(1, int(rng.gauss(shape.words, shape.words / 3)))
        words = " ".join(rng.choice(vocabulary) for _ in range(count))
        yield f"c{index}m{line} {words}"


def _chatgpt(shape: ExportShape, index: int, vocabulary: list[str], rng: random.Random) -> dict[str, Any]:
    start = START + timedelta(hours=7 * index)
    root = f"root-{index}"
    mapping: dict[str, Any] = {root: {"id": root, "parent": None, "children": [], "message": None}}

    def node(node_id: str, parent: str, role: str, text: str | None, at: float | None, **extra: Any) -> None:
        message = None
        if text is not None:
            message = {
                "id": node_id,
                "author": {"role": role, "name": None, "metadata": {}},
                "create_time": at,
                "content": {"content_type": "text", "parts": [text]},
                "status": "finished_successfully",
                "metadata": extra.pop("metadata", {}),
                "recipient": extra.pop("recipient", "all"),
            }
        mapping[node_id] = {"id": node_id, "parent": parent, "children": [], "message": message}
        mapping[parent]["children"].append(node_id)

    node(f"sys-{index}", root, "system", "", None, metadata={"is_visually_hidden_from_conversation": True})
    parent = f"sys-{index}"
    for line, text in enumerate(_lines(shape, index, vocabulary, rng)):
        at = (start + timedelta(minutes=line)).timestamp()
        role = "user" if line % 2 == 0 else "assistant"
        node_id = f"n{index}-{line}"
        node(node_id, parent, role, text, at)
        if line == 1:  # a regenerated answer on another branch, and a tool's line beside it
            node(f"regen-{index}", parent, "assistant", f"c{index} regenerated answer {text}", at + 5)
            node(f"tool-{index}", f"regen-{index}", "tool", f"c{index} tool output", at + 6)
        parent = node_id
    return {
        "id": f"conv-{index:06d}",
        "title": f"Conversation {index}",
        "create_time": start.timestamp(),
        "update_time": (start + timedelta(minutes=shape.messages_per_conversation)).timestamp(),
        "current_node": parent,
        "mapping": mapping,
    }


def _claude(shape: ExportShape, index: int, vocabulary: list[str], rng: random.Random) -> dict[str, Any]:
    start = START + timedelta(hours=7 * index)
    messages = []
    for line, text in enumerate(_lines(shape, index, vocabulary, rng)):
        at = (start + timedelta(minutes=line)).isoformat().replace("+00:00", "Z")
        messages.append(
            {
                "uuid": f"m-{index}-{line}",
                "sender": "human" if line % 2 == 0 else "assistant",
                "text": text,
                "content": [{"type": "text", "text": text}],
                "created_at": at,
                "updated_at": at,
                "attachments": [],
                "files": [],
            }
        )
    return {
        "uuid": f"claude-{index:06d}",
        "name": f"Chat {index}",
        "created_at": start.isoformat(),
        "updated_at": start.isoformat(),
        "chat_messages": messages,
    }


def write_export(path: Path, kind: Format, shape: ExportShape, *, zipped: bool = False) -> Path:
    """Write a generated export (conversations.json, or a zip holding it) one conversation at a time."""
    rng = random.Random(shape.seed)
    vocabulary = _vocabulary(rng)
    build = _chatgpt if kind == "chatgpt" else _claude

    def write(out: Any) -> None:
        out.write(b"[")
        for index in range(shape.conversations):
            if index:
                out.write(b",\n")
            out.write(json.dumps(build(shape, index, vocabulary, rng), ensure_ascii=False).encode())
        out.write(b"]")

    if zipped:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            with archive.open("conversations.json", "w", force_zip64=True) as entry:
                write(entry)
            archive.writestr("user.json", "{}")
    else:
        with path.open("wb") as file:
            write(file)
    return path
