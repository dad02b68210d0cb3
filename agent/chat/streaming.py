"""Watching a turn while the model writes it: the answer so far, and which tool is running.

Telegram-free: a surface passes a `TurnProgress` to `TurnService.reply` and shows what it hears
(bot/delivery/streaming.py turns it into Telegram drafts). What is streamed is a preview only: the stored
and delivered answer is still the run's final output, so a preview that never arrives costs nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable
from typing import Protocol

from pydantic_ai import CancellationToken, RunContext
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import FunctionModel

from agent.chat import activity
from agent.chat.deps import TurnDeps


class TurnProgress(Protocol):
    """What a surface hears while a turn runs; neither call may raise (a preview never fails a turn)."""

    async def text(self, so_far: str) -> None:
        """The answer as written so far by the model's current response."""
        ...

    async def tool(self, name: str, doing: str) -> None:
        """A tool (`conversation_search`, `memory_add`, ...) starts running; `doing` says what it
        does in the person's words (agent/chat/activity.py), never part of the answer."""
        ...

    @property
    def cancellation(self) -> CancellationToken | None:
        """Cancelled when the person stops the answer (None: they cannot); the run then ends."""
        ...


def can_stream(model: Model | str) -> bool:
    """Whether the model answers streamed requests (a scripted model without a stream function does not)."""
    return not (isinstance(model, FunctionModel) and model.stream_function is None)


def event_handler(
    progress: TurnProgress, visible: Callable[[str], str] = lambda text: text
) -> EventStreamHandler[TurnDeps]:
    """A PydanticAI `event_stream_handler` that reports text and tool calls to `progress`.

    It runs once per model request: each response's text starts afresh, so text written before a
    tool call is replaced by the answer written after it. `visible` hides what the reader must not
    see (the photo description the model writes first, agent/chat/attachments.py).
    """

    async def handle(ctx: RunContext[TurnDeps], events: AsyncIterable[AgentStreamEvent]) -> None:
        parts: dict[int, str] = {}
        async for event in events:
            if isinstance(event, FunctionToolCallEvent):
                part = event.part
                await progress.tool(part.tool_name, activity.doing(part.tool_name, part.args_as_dict()))
                continue
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                parts[event.index] = event.part.content
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                parts[event.index] = parts.get(event.index, "") + event.delta.content_delta
            else:
                continue
            await progress.text(visible("".join(parts[i] for i in sorted(parts))))

    return handle
