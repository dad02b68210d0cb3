"""What a tool is doing, in the words the person reads while it runs ("Checking what I remember
about your sister…"). Telegram-free: a surface shows it where the answer will appear."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The longest bit of the model's query quoted back to the person.
QUOTE_CHARS = 60


def _quote(value: Any) -> str:
    text = " ".join(str(value).split()) if isinstance(value, str | int) else ""
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1] + "…"


def doing(tool: str, args: Mapping[str, Any]) -> str:
    """The person's view of a tool call: what the companion is doing, with what it looks for."""
    query = _quote(args.get("query", ""))
    if tool == "conversation_search":
        return (
            f"Looking through our conversations for “{query}”…"
            if query
            else "Looking through our conversations…"
        )
    if tool == "conversation_get":
        return "Rereading what we said…"
    if tool == "memory_search":
        return f"Checking what I remember about {query}…" if query else "Checking what I remember…"
    if tool == "memory_add":
        return "Making a note of that…"
    if tool == "memory_pin":
        return "Putting that first in what I remember…"
    if tool == "memory_reword":
        return "Putting that in your words…"
    if tool == "memory_sources":
        return "Looking up where I got that…"
    return "Thinking it over…"
