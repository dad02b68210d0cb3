"""What a turn was sent with: the note ahead of the person's words in that turn's user prompt.

The time and the facts found for one message change every turn, so they travel with the turn they
belong to, as the first text of its user prompt, instead of sitting in the instructions ahead of the
history (where they would change every byte after them and no cache could be read). The note stays
with its turn in the stored history, so the next request repeats the same bytes; when the history
is cut, the notes of older turns are dropped first (agent/history/window.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage, ModelRequest, UserContent, UserPromptPart

OPEN = "<this_turn>"
CLOSE = "</this_turn>"


def note(lines: Sequence[str]) -> str:
    """The turn's note: its lines (already fenced or neutralised where they hold stored text) in a tag."""
    body = "\n".join(line for line in lines if line)
    return f"{OPEN}\n{body}\n{CLOSE}" if body else ""


def is_note(item: object) -> bool:
    """Whether a user prompt item is a turn's note rather than the person's words."""
    return isinstance(item, str) and item.startswith(OPEN) and item.rstrip().endswith(CLOSE)


def with_note(turn_note: str, content: str | Sequence[UserContent]) -> str | list[UserContent]:
    """A user prompt with the note first (the content alone when there is no note)."""
    if not turn_note:
        return content if isinstance(content, str) else list(content)
    items = [content] if isinstance(content, str) else list(content)
    return [turn_note, *items]


def words(part: UserPromptPart) -> str:
    """What the person wrote in this prompt: its text without the turn's note."""
    if isinstance(part.content, str):
        return part.content
    return "\n\n".join(item for item in part.content if isinstance(item, str) and not is_note(item))


def turn_note(message: ModelMessage) -> str:
    """The note of a request's user prompt ('' when it has none)."""
    if isinstance(message, ModelRequest):
        for part in message.parts:
            if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                for item in part.content:
                    if is_note(item):
                        return str(item)
    return ""


def without_notes(message: ModelMessage) -> ModelMessage:
    """The message with its user prompts' notes removed (a prompt left with one text becomes that text)."""
    if not isinstance(message, ModelRequest):
        return message
    changed = False
    parts = []
    for part in message.parts:
        if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
            kept = [item for item in part.content if not is_note(item)]
            if len(kept) != len(part.content):
                changed = True
                content: str | list[UserContent] = (
                    kept[0] if len(kept) == 1 and isinstance(kept[0], str) else kept
                )
                part = dataclasses.replace(part, content=content)
        parts.append(part)
    return dataclasses.replace(message, parts=parts) if changed else message
