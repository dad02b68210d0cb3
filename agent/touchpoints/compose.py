"""Composition: one model call per due touchpoint, in the persona's voice, with the user's context.

The output is typed (send or not, and the text): a decline is `send=false`, so no "stay silent"
marker can ever reach a chat, and an empty text is a decline too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from agent.chat.persona import persona_for
from agent.core.caching import static_cache_settings
from agent.core.settings import Settings
from agent.core.usage import record_run


class Composition(BaseModel):
    """Whether to write first now, and what."""

    send: bool = Field(description="False when writing first now would not be welcome or useful.")
    text: str = Field(default="", description="The message to send when send is true; short, warm.")


@dataclass(frozen=True)
class Occasion:
    """Why and when the touchpoint is composed, as the model reads it."""

    reason: str
    local_now: str
    context: str


TASK = """\
## Now: writing first
Nobody has written to you: you are considering writing first to follow up on this:
{reason}
It is {local_now} for them. Decide whether a short message from you is welcome now; if so, write it
(send=true, the text as you would send it in the chat). If not, send=false and no text. Never
mention that this is scheduled, a follow-up or a reminder system; never guilt or pressure them.
"""

compose_agent: Agent[None, Composition] = Agent(
    output_type=Composition, name="proactive", defer_model_check=True
)


def _occasion(occasion: Occasion) -> str:
    """What is this user's own: their context tiers and the task."""
    task = TASK.format(reason=occasion.reason, local_now=occasion.local_now)
    return "\n\n".join(part for part in (occasion.context, task) if part)


async def compose(model: Model | str, settings: Settings, occasion: Occasion) -> Composition:
    """One model call with a timeout and an output cap; raises when the model fails."""
    persona = persona_for(settings).chat
    name = model if isinstance(model, str) else model.model_name
    async with asyncio.timeout(settings.summary_timeout_seconds):
        result = await compose_agent.run(
            f"(Write first about: {occasion.reason})",
            model=model,
            # The persona first, a literal instruction the same for every user (cached where it is
            # long enough), then this user's part, computed (sorted after it).
            instructions=[persona, lambda: _occasion(occasion)],
            model_settings=ModelSettings(
                max_tokens=settings.summary_max_tokens, timeout=settings.summary_timeout_seconds
            )
            | static_cache_settings(settings, name, persona),
        )
    record_run("proactive", result.usage)
    output = result.output
    if not output.text.strip():
        return Composition(send=False)
    return Composition(send=output.send, text=output.text.strip())
