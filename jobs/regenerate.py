"""Rewriting a day's summary from all of its messages, when the user asks for it in the timeline.

The timeline's "Regenerate summary" only records the request (`day_segments.regenerate_requested_at`);
the day-summaries job does the work, like every other summary, so the request is rate-limited and
cheap and a model failure never reaches the page. A rewrite reads the whole day afresh (the old
summary is not shown to the model, so a wrong line in it is not carried over), in batches that fold
into each other so a very long day never becomes one enormous prompt. It is stored with the same
version check as any summary; a finalised day stays final; its note says "day summary regenerated".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Literal

from pydantic_ai.exceptions import AgentRunError
from sqlalchemy import select

from agent.account.groups import GROUP
from agent.core.usage import metering, store_usage
from agent.digest.imported import IMPORT_SUMMARY_INSTRUCTIONS, summary_speaker
from agent.digest.summaries import MAX_KEY_MOMENTS, SUMMARY_INSTRUCTIONS, DaySummary, Line, summarise_day
from agent.history.imported import IMPORTED_LINE
from db.models import User
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.users import user_present
from jobs.context import JobContext

logger = logging.getLogger(__name__)

# Messages per model call; each batch folds into the summary of the batches before it.
BATCH_MESSAGES = 300

# stored: the new version is in; empty: nothing to summarise; conflict: another summary landed first.
Outcome = Literal["stored", "empty", "conflict"]


@dataclass
class RegenerationCounts:
    """What one pass over the requested rewrites did."""

    requested: int = 0
    updated: int = 0
    failed: int = 0


async def regenerate_segment(ctx: JobContext, segment_id: int) -> Outcome:
    """Rewrite one day's summary from all its messages (raises when the model fails)."""
    async with ctx.sessions() as session:
        repo = DaySummaryRepository(session)
        segment = await repo.get(segment_id)
        if segment is None:
            return "empty"
        messages = list(await repo.day_messages(segment))
        group = await session.scalar(select(User.kind).where(User.id == segment.user_id)) == GROUP
    if not messages:
        return "empty"
    imported = any(m.kind == IMPORTED_LINE for m in messages)
    result: DaySummary | None = None
    with metering() as meter:  # a rewrite's model calls count towards the user's usage
        for start in range(0, len(messages), BATCH_MESSAGES):
            batch = messages[start : start + BATCH_MESSAGES]
            result = await summarise_day(
                ctx.summary_model,
                ctx.settings,
                day=segment.day,
                previous=result.markdown() if result is not None else None,
                lines=[Line(m.id, m.role, m.content, m.sent_at, summary_speaker(m)) for m in batch],
                final=segment.status == "final",
                group=group,
                # A day with a chat imported from another assistant is told as the person's talk with it.
                instructions=IMPORT_SUMMARY_INSTRUCTIONS if imported else SUMMARY_INSTRUCTIONS,
            )
    assert result is not None
    key_moments: list[Any] = [{"text": text, "message_id": messages[-1].id} for text in result.key_moments]
    async with ctx.sessions() as session, session.begin():
        if not await user_present(session, segment.user_id):
            return "empty"  # forgotten while the model was summarising: write nothing
        stored = await DaySummaryRepository(session).store(
            segment,
            expected_last_id=segment.last_summarized_message_id,
            summary=result.markdown(),
            key_moments=key_moments[:MAX_KEY_MOMENTS],
            last_message=messages[-1],
            at=ctx.clock.now(),
            final=False,
            regenerated=True,
        )
        # Last in the transaction (agent/core/usage.py).
        await store_usage(session, segment.user_id, ctx.clock.now().astimezone(UTC).date(), meter)
    logger.info("day summary regenerated", extra={"segment_id": segment_id, "stored": stored})
    return "stored" if stored else "conflict"


async def run_regenerations(ctx: JobContext) -> RegenerationCounts:
    """Rewrite every day whose summary a user asked to regenerate; a failure asks again."""
    async with ctx.sessions() as session:
        requested = await DaySummaryRepository(session).regeneration_ids()
    counts = RegenerationCounts(requested=len(requested))
    for segment_id in requested:
        async with ctx.sessions() as session, session.begin():
            taken = await DaySummaryRepository(session).take_regeneration(segment_id)
        if not taken:
            continue  # another worker has it
        try:
            outcome = await regenerate_segment(ctx, segment_id)
        except (AgentRunError, TimeoutError, OSError) as exc:
            counts.failed += 1
            logger.warning("regeneration failed", extra={"segment_id": segment_id, "error": repr(exc)})
            outcome = "conflict"
        if outcome == "stored":
            counts.updated += 1
        elif outcome == "conflict":
            await _ask_again(ctx, segment_id)  # the next run tries again
    return counts


async def _ask_again(ctx: JobContext, segment_id: int) -> None:
    async with ctx.sessions() as session, session.begin():
        await DaySummaryRepository(session).request_regeneration(segment_id, ctx.clock.now())
