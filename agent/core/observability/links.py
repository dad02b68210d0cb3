"""A background job's span linked to the turns it works on: their traceparents, kept in the snapshots.

A turn's context span records its traceparent in the context snapshot (`generated_prompts`,
tracing.traced_context); a job working on that conversation, day or person later reads them back
and links its own trace to those turns, so a backend shows where the work came from.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.trace import get_current_span
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.observability.state import current
from agent.core.observability.tracing import span_context
from db.repositories.prompts import PromptRepository

logger = logging.getLogger(__name__)
# A job links to at most this many turns (a backend shows each link; the newest say enough).
MAX_LINKS = 20


async def link_turns(
    sessions: async_sessionmaker[AsyncSession],
    *,
    user_id: int | None = None,
    conversation_id: int | None = None,
    message_ids: Sequence[int] | None = None,
    reminder_id: int | None = None,
) -> None:
    """Link the current span to the traces of the newest turns it works on: a conversation's, those
    that stored `message_ids`, the one that set a reminder, or else the person's own."""
    if current.tracer is None:
        return
    target = get_current_span()
    if conversation_id is not None:
        target.set_attribute("nikita.conversation.id", conversation_id)
    if message_ids is not None and not message_ids:
        return
    if user_id is None and conversation_id is None and message_ids is None:
        return
    try:
        async with sessions() as session:
            parents = await PromptRepository(session).traces(
                user_id=user_id,
                conversation_id=conversation_id,
                message_ids=message_ids,
                reminder_id=reminder_id,
                limit=MAX_LINKS,
            )
    except (SQLAlchemyError, OSError) as exc:  # a link is a nicety: the job goes on without it
        logger.debug("no links to the turns", extra={"error": repr(exc)})
        return
    for parent in parents:
        if (context := span_context(parent)) is not None:
            target.add_link(context, {"nikita.link": "turn"})
