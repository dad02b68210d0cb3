"""Day summaries: after each conversation, in-day when due, and (with final=True) at local midnight."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from pydantic_ai.exceptions import AgentRunError

from agent.core.usage import metering, store_usage
from agent.digest.summaries import MAX_KEY_MOMENTS, Line, summarise_day
from db.memory_repositories import DaySummaryRepository
from db.repositories import user_present
from jobs.context import JobContext
from jobs.regenerate import run_regenerations

logger = logging.getLogger(__name__)


async def summarise_segment(
    ctx: JobContext, segment_id: int, *, final: bool = False, notes: Sequence[str] = ()
) -> bool:
    """Fold the day's new messages into its summary; True when a new version (and note) was stored.

    The model call happens outside any transaction; the write is guarded by the version the
    summary started from, so a rerun or a concurrent worker never stores it (or its note) twice.
    Raises when the model fails: the transcript is untouched and the caller retries.
    """
    async with ctx.sessions() as session:
        repo = DaySummaryRepository(session)
        segment = await repo.get(segment_id)
        if segment is None or segment.status != "open":
            return False
        messages = list(await repo.unsummarised(segment))
    if not messages:
        if final:
            async with ctx.sessions() as session, session.begin():
                await DaySummaryRepository(session).finalise_unchanged(segment_id, ctx.clock.now())
        return False
    lines = [Line(m.id, m.role, m.content, m.sent_at) for m in messages]
    with metering() as meter:
        result = await summarise_day(
            ctx.summary_model,
            ctx.settings,
            day=segment.day,
            previous=segment.summary,
            lines=lines,
            notes=notes,
            final=final,
        )
    key_moments: list[Any] = [{"text": text, "message_id": messages[-1].id} for text in result.key_moments]
    async with ctx.sessions() as session, session.begin():
        if not await user_present(session, segment.user_id):
            return False  # forgotten while the model was summarising
        stored = await DaySummaryRepository(session).store(
            segment,
            expected_last_id=segment.last_summarized_message_id,
            summary=result.markdown(),
            key_moments=key_moments[:MAX_KEY_MOMENTS],
            last_message=messages[-1],
            at=ctx.clock.now(),
            final=final,
        )
        # Last in the transaction (agent/core/usage.py).
        await store_usage(session, segment.user_id, ctx.clock.now().astimezone(UTC).date(), meter)
    logger.info(
        "day summary",
        extra={"segment_id": segment_id, "stored": stored, "final": final, "messages": len(lines)},
    )
    return stored


async def run_due_summaries(ctx: JobContext) -> dict[str, Any]:
    """Summarise every day flagged by the turn (10 new messages or raw text over budget).

    Rewrites asked for in the timeline go first and count as due days too.
    """
    rewrites = await run_regenerations(ctx)
    async with ctx.sessions() as session:
        due = await DaySummaryRepository(session).due_ids()
    updated, failed = rewrites.updated, rewrites.failed
    for segment_id in due:
        async with ctx.sessions() as session, session.begin():
            taken = await DaySummaryRepository(session).take_due(segment_id)
        if not taken:
            continue
        try:
            updated += await summarise_segment(ctx, segment_id)
        except (AgentRunError, TimeoutError, OSError) as exc:
            failed += 1
            logger.warning("in-day summary failed", extra={"segment_id": segment_id, "error": repr(exc)})
            await _flag_again(ctx, segment_id)
    return {"due": len(due) + rewrites.requested, "updated": updated, "failed": failed}


async def _flag_again(ctx: JobContext, segment_id: int) -> None:
    # The raw transcript stays as it was; the next run tries again.
    async with ctx.sessions() as session, session.begin():
        segment = await DaySummaryRepository(session).get(segment_id)
        if segment is not None and segment.status == "open":
            segment.summary_due = True
