"""Day summaries: after each conversation, in-day when due, and (with final=True) at local midnight."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from pydantic_ai.exceptions import AgentRunError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.account.groups import GROUP
from agent.core import observability
from agent.core.usage import UsageMeter, metering, store_usage
from agent.digest.imported import IMPORT_SUMMARY_INSTRUCTIONS, summary_speaker
from agent.digest.summaries import MAX_KEY_MOMENTS, SUMMARY_INSTRUCTIONS, DaySummary, Line, summarise_day
from db.models import IMPORTED_DAY, DaySegment, TranscriptMessage, User
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.users import user_present
from jobs.context import JobContext
from jobs.regenerate import run_regenerations

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DayFold:
    """What a new summary of a day starts from: the segment and its messages since the last one."""

    segment: DaySegment
    messages: list[TranscriptMessage]
    # The day is a group chat's: its prompt speaks of members by name (agent/digest/groups.py).
    group: bool = False


@dataclass(frozen=True)
class DayDraft:
    """A summary the model wrote for a fold, with what it cost (stored with it)."""

    fold: DayFold
    result: DaySummary
    meter: UsageMeter


async def pending_fold(session: AsyncSession, segment_id: int) -> DayFold | None:
    """The open (or imported, IMPORTED_DAY) segment and its messages since the last summary (maybe
    none); None when closed or missing."""
    repo = DaySummaryRepository(session)
    segment = await repo.get(segment_id)
    if segment is None or segment.status not in ("open", IMPORTED_DAY):
        return None
    messages = list(await repo.unsummarised(segment))
    kind = await session.scalar(select(User.kind).where(User.id == segment.user_id))
    return DayFold(segment, messages, group=kind == GROUP)


async def draft_fold(
    ctx: JobContext,
    fold: DayFold,
    *,
    final: bool,
    notes: Sequence[str],
    lines: Sequence[Line] | None = None,
    imported: bool = False,
) -> DayDraft:
    """One SUMMARY_MODEL call, outside any transaction; raises when the model fails.

    `lines`: the fold's messages as the model reads them (by default as stored); `imported`: the day's
    lines are a chat imported from another assistant, told as the person's talk with it and metered
    as "import" (jobs/imported.py)."""
    if lines is None:
        lines = [Line(m.id, m.role, m.content, m.sent_at, summary_speaker(m)) for m in fold.messages]
    with metering() as meter:
        result = await summarise_day(
            ctx.summary_model,
            ctx.settings,
            day=fold.segment.day,
            previous=fold.segment.summary,
            lines=lines,
            notes=notes,
            final=final,
            group=fold.group,
            instructions=IMPORT_SUMMARY_INSTRUCTIONS if imported else SUMMARY_INSTRUCTIONS,
            usage="import" if imported else "day_summary",
        )
    return DayDraft(fold, result, meter)


async def store_draft(ctx: JobContext, session: AsyncSession, draft: DayDraft, *, final: bool) -> bool:
    """Store the draft and its cost in the caller's transaction, guarded by the version it started from.

    False when the user was forgotten meanwhile or another writer stored a newer version first.
    """
    segment, messages = draft.fold.segment, draft.fold.messages
    if not await user_present(session, segment.user_id):
        return False  # forgotten while the model was summarising
    last = messages[-1]
    key_moments: list[Any] = [{"text": text, "message_id": last.id} for text in draft.result.key_moments]
    stored = await DaySummaryRepository(session).store(
        segment,
        expected_last_id=segment.last_summarized_message_id,
        summary=draft.result.markdown(),
        key_moments=key_moments[:MAX_KEY_MOMENTS],
        last_message=last,
        at=ctx.clock.now(),
        final=final,
    )
    # After the summary's rows: usage is a transaction's last write (agent/core/usage.py); a caller
    # that writes more in this transaction stores its own usage after (jobs/pipeline.py).
    await store_usage(session, segment.user_id, ctx.clock.now().astimezone(UTC).date(), draft.meter)
    logger.info(
        "day summary",
        extra={"segment_id": segment.id, "stored": stored, "final": final, "messages": len(messages)},
    )
    return stored


async def summarise_segment(
    ctx: JobContext, segment_id: int, *, final: bool = False, notes: Sequence[str] = ()
) -> bool:
    """Fold the day's new messages into its summary; True when a new version (and note) was stored.

    The model call happens outside any transaction; the write is guarded by the version the
    summary started from, so a rerun or a concurrent worker never stores it (or its note) twice.
    Raises when the model fails: the transcript is untouched and the caller retries. A trace of its own,
    linked to the turns whose messages it folds in.
    """
    attributes: observability.Attributes = {
        "nikita.job": "day-summary",
        "nikita.day_segment.id": segment_id,
        "nikita.final": final,
    }
    with observability.root_span("job day-summary", attributes):
        return await _summarise(ctx, segment_id, final=final, notes=notes)


async def _summarise(ctx: JobContext, segment_id: int, *, final: bool, notes: Sequence[str]) -> bool:
    async with ctx.sessions() as session:
        fold = await pending_fold(session, segment_id)
    if fold is None:
        return False
    observability.annotate({"nikita.user.id": fold.segment.user_id, "nikita.messages": len(fold.messages)})
    if observability.tracing():
        # Linked to the turns whose messages this version folds in.
        said = [m.id for m in fold.messages if m.role == "user"]
        await observability.link_turns(ctx.sessions, user_id=fold.segment.user_id, message_ids=said)
    if not fold.messages:
        if final:
            async with ctx.sessions() as session, session.begin():
                await DaySummaryRepository(session).finalise_unchanged(segment_id, ctx.clock.now())
        return False
    draft = await draft_fold(ctx, fold, final=final, notes=notes)
    async with ctx.sessions() as session, session.begin():
        return await store_draft(ctx, session, draft, final=final)


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
