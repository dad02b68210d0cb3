"""What a run the person stopped leaves: the text written so far, and a history that stays valid.

PydanticAI keeps a cancelled run's messages, the cut-off response and a tool round that never
finished included. Stored as they are, the next request would carry tool calls without results,
so the unfinished end is replaced by one plain answer: the text written so far and a note that the
person stopped it there, which is how the model learns next turn that it was cut off.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserContent,
    UserPromptPart,
)

# The end of a stopped answer as the model reads it in the history (the person never sees it).
STOPPED_NOTE = "[The person pressed stop here: this answer was cut off.]"
# What is sent and stored when the person stopped the answer before any of it was written.
STOPPED_EMPTY = "⏹"


def stopped_exchange(
    messages: Sequence[ModelMessage], prompt: str | Sequence[UserContent], sent_at: datetime
) -> tuple[str, list[ModelMessage]]:
    """The text written so far, and the run's `messages` ending in it as a complete answer
    (`prompt`, the turn's user prompt, stands in for a request that never went out)."""
    kept = list(messages)
    if kept and isinstance(kept[-1], ModelRequest) and kept[-1].state == "interrupted":
        kept.pop()  # tool results still being collected: the round they belong to is dropped too
    written = ""
    if kept and isinstance(kept[-1], ModelResponse):
        # Cut off mid-stream, or calling tools that never returned: only its text stays.
        written = "".join(part.content for part in kept.pop().parts if isinstance(part, TextPart)).strip()
    if not kept:  # stopped before the request went out
        kept = [ModelRequest(parts=[UserPromptPart(prompt, timestamp=sent_at)])]
    note = f"{written}\n\n{STOPPED_NOTE}" if written else STOPPED_NOTE
    kept.append(ModelResponse(parts=[TextPart(note)], timestamp=sent_at))
    return written, kept
