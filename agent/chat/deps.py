"""What one run of the chat agent knows (`TurnDeps`): the agent, its tools and the turn share it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

if TYPE_CHECKING:
    from agent.memory.service import Facts
    from agent.search.recall import Recall


@dataclass
class TurnDeps:
    """What one turn's run knows: the user (tools are scoped to it), the time and the built context."""

    user_id: int
    conversation_id: int
    now: datetime
    timezone: str
    sessions: async_sessionmaker[AsyncSession]
    # The persona prompt (agent/chat/persona.py: PERSONA_NAME filled in, or PERSONA_FILE's text).
    persona: str
    # This conversation's package (agent/context/layers.py): the instructions after the persona.
    package_text: str = ""
    # This turn's note: the time and the facts found for this message, first in the user prompt.
    note: str = ""
    # Conversation search for the recall tools (agent/chat/tools.py); None turns them into no-ops.
    recall: Recall | None = None
    # The person's facts for the memory tools; None turns them into no-ops.
    facts: Facts | None = None
    # The transcript row of the user's message this turn answers (what a reminder is set from).
    message_id: int | None = None
    # Whether the tools may change or remove what is remembered (forget, correct, pin, reword, cancel
    # a reminder): in a group only when the sender administers it; adding stays open to everyone.
    may_change_memory: bool = True


ADMINS_ONLY = (
    "Not changed: only this group's admins can change or remove what I remember of it. Tell them so "
    "plainly; an admin can ask me."
)


def refused_change(deps: TurnDeps) -> dict[str, Any] | None:
    """The answer of a memory tool that would change or remove something, when this turn may not."""
    return None if deps.may_change_memory else {"changed": False, "note": ADMINS_ONLY}
