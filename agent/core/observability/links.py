"""A background job's span linked to the turns it works on: their traceparents, kept in the snapshots.

A turn's context span records its traceparent in the context snapshot (`generated_prompts`,
tracing.traced_context); a job working on that conversation later reads them back and links its
own trace to those turns, so a backend shows where the work came from.
"""

from __future__ import annotations

import logging

from opentelemetry.trace import get_current_span
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.observability.state import current
from agent.core.observability.tracing import span_context
from db.repositories.prompts import PromptRepository

logger = logging.getLogger(__name__)


async def link_conversation(sessions: async_sessionmaker[AsyncSession], conversation_id: int | None) -> None:
    """Name the conversation on the current span and link it to the traces of its newest turns."""
    if current.tracer is None or conversation_id is None:
        return
    target = get_current_span()
    target.set_attribute("nikita.conversation.id", conversation_id)
    try:
        async with sessions() as session:
            parents = await PromptRepository(session).traces(conversation_id)
    except (SQLAlchemyError, OSError) as exc:  # a link is a nicety: the job goes on without it
        logger.debug("no links to the conversation's turns", extra={"error": repr(exc)})
        return
    for parent in parents:
        if (context := span_context(parent)) is not None:
            target.add_link(context, {"nikita.link": "turn"})
