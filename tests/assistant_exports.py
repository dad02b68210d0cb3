"""Small ChatGPT and Claude exports for tests, written as the two assistants write them.

`write_chatgpt_export` and `write_claude_export` write a `conversations.json` (or the export's zip
around it) holding the conversations of `chatgpt_conversations` / `claude_conversations`: a few
short talks whose lines the tests look for by their marker words. The ChatGPT file keeps what the
real one keeps and an import must leave out: a regenerated answer and an edited prompt on branches
off the current path, a hidden system node, a tool node; one message has no time (null). In both,
the other assistant says things about itself ("I am a lighthouse keeper ...") that are never facts
about the person.

`padded` adds filler conversations, for files of a given size.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

# What the person told each assistant, and what only a left-out branch or the assistant holds.
DOG = "My dog Biscuit is a beagle and she is scared of thunderstorms."
DOG_ANSWER = "Beagles often fear loud noises; a quiet den with a blanket helps."
REGENERATED = "Zebrafinch regenerated answer that was replaced."
EDITED_AWAY = "Quokkaprompt the first wording I edited away."
ASSISTANT_CLAIM = "I am a lighthouse keeper in Oslo."
HIDDEN_SYSTEM = "Hiddensystem instructions nobody wrote."
TOOL_OUTPUT = "Toolnode search output."
GARDEN = "I have a vegetable garden with twelve tomato plants."
NULL_TIME = "Untimed message about my balcony herbs."
SISTER = "I have a sister called Marta who lives in Porto."
SISTER_ANSWER = "Porto is lovely; do you visit Marta often?"
CLAUDE_CLAIM = "I am a concert pianist from Vienna."
TRIP = "I'm planning a hiking trip to the Dolomites in September."

Source = Literal["chatgpt", "claude"]


@dataclass(frozen=True)
class Line:
    """One message of a test conversation: who said it, what, and when (None: no time)."""

    role: Literal["user", "assistant"]
    text: str
    at: datetime | None


@dataclass(frozen=True)
class Talk:
    """One test conversation."""

    id: str
    title: str
    lines: list[Line]


def chatgpt_conversations(now: datetime) -> list[Talk]:
    """What the ChatGPT export's current paths hold: the dog talk a year before `now`, the garden."""
    year_ago = now - timedelta(days=365)
    garden = now - timedelta(days=200)
    return [
        Talk(
            "c-dog",
            "Beagle and thunder",
            [
                Line("user", DOG, year_ago),
                Line("assistant", f"{ASSISTANT_CLAIM} {DOG_ANSWER}", year_ago + timedelta(seconds=20)),
                Line("user", "Thanks, I will try the blanket tonight.", year_ago + timedelta(minutes=2)),
            ],
        ),
        Talk(
            "c-garden",
            "Tomatoes",
            [
                Line("user", GARDEN, garden),
                Line("assistant", "Twelve is a good number; water them in the morning.", garden),
                Line("user", NULL_TIME, None),
            ],
        ),
    ]


def claude_conversations(now: datetime) -> list[Talk]:
    """What the Claude export holds: the sister talk about eight months before `now`, the trip."""
    sister = now - timedelta(days=240)
    trip = now - timedelta(days=30)
    return [
        Talk(
            "u-sister",
            "Family in Porto",
            [
                Line("user", SISTER, sister),
                Line("assistant", f"{CLAUDE_CLAIM} {SISTER_ANSWER}", sister + timedelta(seconds=30)),
            ],
        ),
        Talk(
            "u-trip",
            "Dolomites",
            [
                Line("user", TRIP, trip),
                Line("assistant", "September is a fine month there; book the huts early.", trip),
            ],
        ),
    ]


def _epoch(at: datetime | None) -> float | None:
    return at.timestamp() if at is not None else None


def _node(node_id: str, parent: str | None, message: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": node_id, "parent": parent, "children": [], "message": message}


def _chatgpt_message(
    node_id: str, role: str, text: str, at: datetime | None, *, hidden: bool = False
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"is_visually_hidden_from_conversation": True} if hidden else {}
    return {
        "id": node_id,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": _epoch(at),
        "update_time": None,
        "content": {"content_type": "text", "parts": [text]},
        "status": "finished_successfully",
        "metadata": metadata,
    }


def chatgpt_mapping(talk: Talk, *, branches: bool) -> tuple[dict[str, dict[str, Any]], str]:
    """A conversation's `mapping` and its `current_node`: a hidden system root, then the lines; with
    `branches`, an edited-away first prompt and a regenerated last answer off the path, and a tool node."""
    start = talk.lines[0].at or datetime(2020, 1, 1, tzinfo=UTC)
    mapping: dict[str, dict[str, Any]] = {"root": _node("root", None, None)}
    system = _chatgpt_message("sys", "system", HIDDEN_SYSTEM, None, hidden=True)
    mapping["sys"] = _node("sys", "root", system)
    parent = "sys"

    def add(node_id: str, under: str, message: dict[str, Any]) -> None:
        mapping[node_id] = _node(node_id, under, message)
        mapping[under]["children"].append(node_id)

    mapping["root"]["children"].append("sys")
    if branches:
        add("edited", parent, _chatgpt_message("edited", "user", EDITED_AWAY, start))
        add("edited-answer", "edited", _chatgpt_message("edited-answer", "assistant", "Noted.", start))
    for i, line in enumerate(talk.lines):
        node_id = f"{talk.id}-{i}"
        add(node_id, parent, _chatgpt_message(node_id, line.role, line.text, line.at))
        if branches and i == 0:
            tool = _chatgpt_message(f"{node_id}-tool", "tool", TOOL_OUTPUT, line.at)
            add(f"{node_id}-tool", node_id, tool)
        parent = node_id
    answers = [i for i, line in enumerate(talk.lines) if line.role == "assistant"]
    if branches and answers:
        # A sibling of the last answer: the answer the person asked to be regenerated.
        last = answers[-1]
        regen_under = mapping[f"{talk.id}-{last}"]["parent"]
        add("regen", regen_under, _chatgpt_message("regen", "assistant", REGENERATED, talk.lines[last].at))
    return mapping, parent


def chatgpt_json(talks: list[Talk], *, branches: bool = True) -> list[dict[str, Any]]:
    """The list ChatGPT's conversations.json holds."""
    out = []
    for talk in talks:
        mapping, current = chatgpt_mapping(talk, branches=branches)
        times = [line.at for line in talk.lines if line.at is not None]
        out.append(
            {
                "id": talk.id,
                "conversation_id": talk.id,
                "title": talk.title,
                "create_time": _epoch(min(times)),
                "update_time": _epoch(max(times)),
                "current_node": current,
                "mapping": mapping,
                "default_model_slug": "gpt-4o",
            }
        )
    return out


def _iso(at: datetime | None) -> str | None:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z") if at is not None else None


def claude_json(talks: list[Talk]) -> list[dict[str, Any]]:
    """The list Claude's conversations.json holds."""
    out = []
    for talk in talks:
        messages = []
        for i, line in enumerate(talk.lines):
            messages.append(
                {
                    "uuid": f"{talk.id}-{i}",
                    "sender": "human" if line.role == "user" else "assistant",
                    "text": line.text,
                    "content": [{"type": "text", "text": line.text}],
                    "created_at": _iso(line.at),
                    "updated_at": _iso(line.at),
                    "attachments": [],
                    "files": [],
                }
            )
        times = [line.at for line in talk.lines if line.at is not None]
        out.append(
            {
                "uuid": talk.id,
                "name": talk.title,
                "created_at": _iso(min(times)),
                "updated_at": _iso(max(times)),
                "account": {"uuid": "acct"},
                "chat_messages": messages,
            }
        )
    return out


def padded(talks: list[Talk], *, count: int, now: datetime) -> list[Talk]:
    """`talks` and `count` filler conversations of four lines each, one a day before `now`."""
    filler = [
        Talk(
            f"pad-{n}",
            f"Filler {n}",
            [
                Line(
                    "user" if k % 2 == 0 else "assistant",
                    f"Filler line {k} of talk {n} about nothing much.",
                    now - timedelta(days=n + 1, minutes=-k),
                )
                for k in range(4)
            ],
        )
        for n in range(count)
    ]
    return [*talks, *filler]


def _write(path: Path, data: list[dict[str, Any]], *, zipped: bool, extra: dict[str, bytes]) -> Path:
    body = json.dumps(data).encode()
    if not zipped:
        path.write_bytes(body)
        return path
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", body)
        for name, content in extra.items():
            archive.writestr(name, content)
    path.write_bytes(buffer.getvalue())
    return path


def write_chatgpt_export(
    path: Path, now: datetime, *, zipped: bool = True, talks: list[Talk] | None = None
) -> Path:
    """ChatGPT's export at `path`: a zip with conversations.json (and the user.json beside it), or the
    JSON alone; the conversations of `chatgpt_conversations(now)` unless `talks` are given."""
    data = chatgpt_json(talks if talks is not None else chatgpt_conversations(now))
    extra = {"user.json": b'{"id": "user-1"}', "chat.html": b"<html></html>"}
    return _write(path, data, zipped=zipped, extra=extra)


def write_claude_export(
    path: Path, now: datetime, *, zipped: bool = True, talks: list[Talk] | None = None
) -> Path:
    """Claude's export at `path`: a zip with conversations.json (and users.json, projects.json), or the
    JSON alone; the conversations of `claude_conversations(now)` unless `talks` are given."""
    data = claude_json(talks if talks is not None else claude_conversations(now))
    extra = {"users.json": b"[]", "projects.json": b"[]"}
    return _write(path, data, zipped=zipped, extra=extra)


def export_bytes(source: Source, now: datetime, tmp: Path, *, zipped: bool = True) -> bytes:
    """The bytes of a test export of `source`, written under the folder `tmp`."""
    writer = write_chatgpt_export if source == "chatgpt" else write_claude_export
    name = f"{source}-export.zip" if zipped else f"{source}-conversations.json"
    return writer(tmp / name, now, zipped=zipped).read_bytes()
