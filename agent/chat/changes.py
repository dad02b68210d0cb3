"""A change to the conversation's package reaches the model before the person's words, not after them.

The conversation's package is an instruction block whose changes PydanticAI appends to the history
(`on_change="append"`, agent/chat/agent.py), so the cached prefix stays: it records a change as an
`InstructionDeltaPart` on the request it was noticed in, after that request's user prompt, and the
model would read the package last, after what the person said. `ChangesFirst` moves each request's
instruction records (the change, and the window's baseline when one opens there, in their order)
ahead of its user prompt in what is sent; the stored history keeps PydanticAI's order. Every
request of a conversation is moved the same way, so each repeats the bytes of the one before and the
prompt cache reads them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    InstructionBaselinePart,
    InstructionDeltaPart,
    ModelMessage,
    ModelRequest,
    UserPromptPart,
)

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext

_RECORDS = (InstructionDeltaPart, InstructionBaselinePart)


def changes_first(message: ModelMessage) -> ModelMessage:
    """The request with the instruction records that follow its user prompt moved just before it."""
    if not isinstance(message, ModelRequest):
        return message
    # Every request of the history passes here on every model request; most carry no change.
    for part in message.parts:
        if isinstance(part, InstructionDeltaPart):
            break
    else:
        return message
    prompt = next((i for i, part in enumerate(message.parts) if isinstance(part, UserPromptPart)), None)
    if prompt is None:
        return message
    after = message.parts[prompt + 1 :]
    records = [part for part in after if isinstance(part, _RECORDS)]
    if not any(isinstance(part, InstructionDeltaPart) for part in records):
        return message
    rest = [part for part in after if not isinstance(part, _RECORDS)]
    parts = [*message.parts[:prompt], *records, message.parts[prompt], *rest]
    return dataclasses.replace(message, parts=parts)


@dataclass
class ChangesFirst(AbstractCapability[Any]):
    """Sends every request with its package changes before the person's words (see the module doc)."""

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Reorder what this attempt sends; the run's history is left as PydanticAI recorded it."""
        request_context.messages = [changes_first(message) for message in request_context.messages]
        return request_context
