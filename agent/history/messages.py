"""A conversation's history: load and store PydanticAI messages, make them API-valid, fit a budget."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from agent.core.tokens import TokenCounter

logger = logging.getLogger(__name__)

_TRIMMED_MARKER = "\n[... {n} tokens trimmed ...]\n"
_TRIMMED_RE = re.compile(r"\n\[\.\.\. \d+ tokens trimmed \.\.\.\]\n")


@dataclass(frozen=True)
class TrimResult:
    """A history fitted to a budget, with what it cost to get there."""

    messages: list[ModelMessage]
    tokens: int
    # Input messages absent from `messages` (removed by sanitizing or by dropping old turns).
    dropped_messages: int
    # Tool outputs in `messages` shortened by this call to head + placeholder + tail.
    trimmed_tool_outputs: int
    # Tokens of the sanitized history before any trimming.
    original_tokens: int


def load_history(raw: list[Any] | None) -> list[ModelMessage]:
    """Stored JSON to messages; a broken history becomes `[]` with a warning, never an exception."""
    if not raw:
        return []
    if not isinstance(raw, list):
        logger.warning("stored history is not a list (%s); starting without it", type(raw).__name__)
        return []
    try:
        messages = ModelMessagesTypeAdapter.validate_python(raw)
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        logger.warning("stored history does not validate (%s); starting without it", type(exc).__name__)
        return []
    return sanitize_history(messages)


def dump_history(messages: Sequence[ModelMessage]) -> list[Any]:
    """Messages to JSON-able data for storage, without what loading rebuilds as it was: per-request
    instructions (rebuilt every turn), empty fields and zero usage counts (their defaults)."""
    stripped = [
        dataclasses.replace(m, instructions=None)
        if isinstance(m, ModelRequest) and m.instructions is not None
        else m
        for m in messages
    ]
    dumped: list[Any] = ModelMessagesTypeAdapter.dump_python(stripped, mode="json", exclude_none=True)
    for message in dumped:
        usage = message.get("usage")
        if isinstance(usage, dict):
            for name in [name for name, value in usage.items() if value == 0 or value == {}]:
                del usage[name]
    return dumped


def sanitize_history(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """Make a history the Anthropic API accepts: starts with a user prompt, no unpaired tool parts.

    A tool call is paired only with a return in the message right after it (the API requires the
    result in the next message). Trailing requests without a response are dropped.
    """
    msgs = list(messages)
    while True:
        before = len(msgs)
        msgs = _drop_leading(msgs)
        while msgs and isinstance(msgs[-1], ModelRequest):
            msgs.pop()
        msgs, changed = _pair_tool_parts(msgs)
        if not changed and len(msgs) == before:
            return msgs


def trim_history(
    messages: Sequence[ModelMessage],
    *,
    budget: int,
    counter: TokenCounter,
    tool_output_max_tokens: int = 300,
    min_tokens: int = 100,
) -> TrimResult:
    """Fit a history to `budget` tokens (never below `min_tokens`) without splitting a tool call.

    Order: sanitize; shorten long tool outputs of older turns, oldest first; drop the oldest whole
    turns; the newest turn always stays, its own tool outputs shortened only if it alone is over.
    """
    budget = max(budget, min_tokens)
    msgs = sanitize_history(messages)
    counts = [counter.count_message(m) for m in msgs]
    original = total = sum(counts)
    trimmed_at: dict[int, int] = {}

    def trim_range(start: int, stop: int) -> None:
        nonlocal total
        for i in range(start, stop):
            if total <= budget:
                return
            new, n = _trim_tool_outputs(msgs[i], counter, tool_output_max_tokens)
            if n:
                new_count = counter.count_message(new)
                total += new_count - counts[i]
                msgs[i], counts[i], trimmed_at[i] = new, new_count, n

    start = 0
    if total > budget and msgs:
        starts = _turn_starts(msgs)
        trim_range(0, starts[-1])
        for turn_start, next_start in itertools.pairwise(starts):
            if total <= budget:
                break
            total -= sum(counts[turn_start:next_start])
            start = next_start
        trim_range(start, len(msgs))
    kept = msgs[start:]
    return TrimResult(
        messages=kept,
        tokens=total,
        dropped_messages=len(messages) - len(kept),
        trimmed_tool_outputs=sum(n for i, n in trimmed_at.items() if i >= start),
        original_tokens=original,
    )


def _has_user_prompt(message: ModelMessage) -> bool:
    return isinstance(message, ModelRequest) and any(isinstance(p, UserPromptPart) for p in message.parts)


def _drop_leading(msgs: list[ModelMessage]) -> list[ModelMessage]:
    for i, message in enumerate(msgs):
        if _has_user_prompt(message):
            return msgs[i:] if i else msgs
    return []


def _return_id(part: object) -> str | None:
    """The tool call a request part answers, if it answers one."""
    if isinstance(part, ToolReturnPart):
        return part.tool_call_id
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:
        return part.tool_call_id
    return None


def _call_ids(message: ModelMessage) -> set[str]:
    # Native (provider-executed) calls carry their results inside the same response: always paired.
    return {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}


def _return_ids(message: ModelMessage) -> set[str]:
    return {rid for p in message.parts if (rid := _return_id(p)) is not None}


def _has_tool_part(message: ModelMessage) -> bool:
    kinds = (ToolCallPart,) if isinstance(message, ModelResponse) else (ToolReturnPart, RetryPromptPart)
    for part in message.parts:
        if isinstance(part, kinds):
            return True
    return False


def _pair_tool_parts(msgs: list[ModelMessage]) -> tuple[list[ModelMessage], bool]:
    """Drop calls not answered by the next message and answers to no call in the previous one."""
    out: list[ModelMessage] = []
    changed = False
    for i, message in enumerate(msgs):
        # Most messages carry no tool part: they pass as they are (every turn sanitizes the whole history).
        if not _has_tool_part(message):
            if message.parts:
                out.append(message)
            else:
                changed = True
            continue
        if isinstance(message, ModelResponse):
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            answered = _return_ids(nxt) if isinstance(nxt, ModelRequest) else set()
            response_parts = [
                p for p in message.parts if not isinstance(p, ToolCallPart) or p.tool_call_id in answered
            ]
            if len(response_parts) != len(message.parts):
                message = dataclasses.replace(message, parts=response_parts)
        else:
            prev = msgs[i - 1] if i > 0 else None
            called = _call_ids(prev) if isinstance(prev, ModelResponse) else set()
            request_parts = [p for p in message.parts if (rid := _return_id(p)) is None or rid in called]
            if len(request_parts) != len(message.parts):
                message = dataclasses.replace(message, parts=request_parts)
        if message is not msgs[i]:
            changed = True
        if message.parts:
            out.append(message)
        else:
            changed = True
    return out, changed


def _turn_starts(msgs: list[ModelMessage]) -> list[int]:
    """Indices where a turn begins: a user prompt that answers no tool call (so cutting there is safe)."""
    return [
        i
        for i, m in enumerate(msgs)
        if _has_user_prompt(m) and not any(_return_id(p) is not None for p in m.parts)
    ] or [0]


def _trim_tool_outputs(
    message: ModelMessage, counter: TokenCounter, max_tokens: int
) -> tuple[ModelMessage, int]:
    """Shorten this message's long tool outputs to head + placeholder + tail; return how many."""
    if not isinstance(message, ModelRequest):
        return message, 0
    parts = list(message.parts)
    trimmed = 0
    for j, part in enumerate(parts):
        # Only plain returns: typed subclasses (tool search, capabilities) must keep their shape.
        if not isinstance(part, ToolReturnPart) or type(part) is not ToolReturnPart:
            continue
        plain: ToolReturnPart[Any] = part
        # Unwrapped, so an error outcome is trimmed as its text (the wrapper is re-added when sent).
        shortened = _shorten(plain.model_response_str(wrap_if_error=False), max_tokens, counter)
        if shortened is not None:
            parts[j] = dataclasses.replace(plain, content=shortened)
            trimmed += 1
    if not trimmed:
        return message, 0
    return dataclasses.replace(message, parts=parts), trimmed


class TextCaches:
    """The process-wide caches keyed by text (token counts, shortened tool outputs).

    They are not keyed by user, so forgetting anyone clears them whole: a forgotten
    person's words must not stay in memory, and the counts are cheap to recompute.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter

    def drop_user(self, user_id: int) -> None:
        """Clear every text cache (see the class docstring)."""
        self.counter.clear()
        _shorten.cache_clear()


@functools.lru_cache(maxsize=512)
def _shorten(text: str, max_tokens: int, counter: TokenCounter) -> str | None:
    """`text` as head + placeholder + tail within about `max_tokens`, or None if it should stay.

    Cached: every turn (and every model step inside one) trims the same old outputs again.
    """
    if _TRIMMED_RE.search(text):
        return None  # already trimmed: trimming again must change nothing (idempotence)
    if counter.count(text) <= max_tokens:
        return None
    tokens = counter.encode(text)
    marker_cost = counter.count(_TRIMMED_MARKER.format(n=len(tokens)))
    keep = max(max_tokens - marker_cost, 0)
    if len(tokens) <= keep + marker_cost:
        return None  # the placeholder would cost more than it saves
    tail = keep // 3
    head = keep - tail
    marker = _TRIMMED_MARKER.format(n=len(tokens) - head - tail)
    tail_text = counter.decode(tokens[len(tokens) - tail :]) if tail else ""
    return counter.decode(tokens[:head]) + marker + tail_text


def touchpoint_history(reason: str, text: str, at: datetime, persona_name: str) -> list[Any]:
    """The stored history of a conversation the bot opened by writing first: a note standing in for the
    user's turn (the API wants a history to start with one) and the message as the model's answer."""
    note = f"[{persona_name} wrote first, following up on: {reason}]"
    return dump_history(
        [
            ModelRequest(parts=[UserPromptPart(content=note, timestamp=at)]),
            ModelResponse(parts=[TextPart(content=text)], timestamp=at),
        ]
    )
