"""Post-processing of a conversation imported from another assistant's export (jobs/pipeline.py
hands it here by its kind).

The same facts as any conversation's, from the person's own lines only (the other assistant's are
shown by its name and never ground a fact), through the same list, known-facts decisions, tidying and
profile, each at the time of the lines it stands on. Nothing else a live conversation brings: no
threads, thoughts, follow-ups, plans or briefing (the talk is old, and was not with the companion).
Then the summaries of the days it covers, told as the person's talk with that assistant, a past
day finalised. Every model call is metered as "import" (jobs/imports.py paces them against
IMPORT_DAILY_TOKENS).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, date, datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.clock import local_label
from agent.core.errors import UserForgottenError
from agent.core.usage import UsageMeter, metering, store_usage, store_usage_apart
from agent.digest.extraction import Extraction, ground_facts
from agent.digest.imported import extract_imported, named_lines
from agent.digest.summaries import Line
from agent.memory.corrections import without_taken_back
from agent.memory.grounding import dropped
from agent.memory.known import apply_decisions
from db.models import IMPORTED_DAY, Conversation
from db.repositories.day_summaries import FOLD_LINES, DaySummaryRepository
from db.repositories.users import user_present
from jobs.context import JobContext
from jobs.day_summary import DayFold, draft_fold, pending_fold, store_draft
from jobs.queue import Ingested, mark_processed

logger = logging.getLogger(__name__)

# A day's lines folded into its summary per model call (a long imported day takes several).
_FOLDS_PER_DAY = 20


async def run_imported(ctx: JobContext, work: Ingested) -> dict[str, int]:
    """Facts, then the days' summaries, then processed; raises on failure (the worker retries)."""
    kinds = {line.id: work.kind for line in work.lines}
    lines = named_lines(work.lines, kinds)
    counts: dict[str, int] = {}
    output: Extraction | None = None
    if any(line.role == "user" for line in lines):
        with metering() as meter:
            try:
                output = await _extraction(ctx, work, lines)
                counts = await _facts(ctx, work, output, meter)
                meter.kinds.clear()  # stored with the facts
            finally:
                await store_usage_apart(ctx.sessions, work.user_id, _today(ctx), meter)
    counts["day_summaries"] = await _days(ctx, work, notes=[output.summary] if output else [])
    async with ctx.sessions() as session, session.begin():
        processed = await mark_processed(
            session,
            work.conversation_id,
            ctx.worker_id,
            ctx.clock.now(),
            summary=output.summary if output else None,
            tone=output.tone[:64] if output else None,
        )
    counts["processed"] = int(processed)
    return counts


def _today(ctx: JobContext) -> date:
    return ctx.clock.now().astimezone(UTC).date()


async def _extraction(ctx: JobContext, work: Ingested, lines: Sequence[Line]) -> Extraction:
    if work.stored_extraction is not None:  # a rerun: held to the person's own lines again
        reasons = ground_facts(work.stored_extraction, lines, group=False)
        dropped(reasons, writer="import", owner_id=work.user_id, conversation_id=work.conversation_id)
        return work.stored_extraction
    return await extract_imported(
        ctx.summary_model,
        ctx.settings,
        lines,
        ended_local=local_label(work.ended_at, work.timezone),
        known=work.known,
        language=work.language,
        owner=(work.user_id, work.conversation_id),
    )


async def keep_extraction(session: AsyncSession, work: Ingested, output: Extraction) -> None:
    """Stop when the person was forgotten; store a new extraction on its conversation (in the
    transaction of the rows it produces, so a rerun reuses it and never calls the model again)."""
    if not await user_present(session, work.user_id):
        raise UserForgottenError(f"user {work.user_id} was forgotten")
    if work.stored_extraction is None:
        await session.execute(
            update(Conversation)
            .where(Conversation.id == work.conversation_id)
            .values(extraction=output.model_dump(mode="json"))
            .execution_options(synchronize_session=False)
        )


async def _facts(ctx: JobContext, work: Ingested, output: Extraction, meter: UsageMeter) -> dict[str, int]:
    """The facts, each at the time of the latest line it stands on, with the extraction and its cost
    (one transaction: a rerun reuses the stored extraction, and the dedupe keys make a repeat a no-op)."""
    sent = {line.id: line.sent_at for line in work.lines}
    async with ctx.sessions() as session, session.begin():
        await keep_extraction(session, work, output)
        said = [(f.text, f.message_ids) for f in output.user_facts]
        kept = [
            output.user_facts[i]
            for i in await without_taken_back(session, work.user_id, said, at=work.ended_at)
        ]
        by_time: dict[datetime, list[int]] = {}
        for index, fact in enumerate(kept):
            at = max((sent[i] for i in fact.message_ids if i in sent), default=work.ended_at)
            by_time.setdefault(at, []).append(index)
        counts: Counter[str] = Counter()
        for at, indexes in sorted(by_time.items()):
            decided = [kept[i].decided(work.timezone) for i in indexes]
            applied = await apply_decisions(
                session, work.user_id, work.conversation_id, decided, at, source="import"
            )
            counts.update(applied.counts())
        # Last: it locks the day's token counter until the commit (agent/core/usage.py).
        await store_usage(session, work.user_id, _today(ctx), meter)
    return dict(counts)


async def _days(ctx: JobContext, work: Ingested, *, notes: Sequence[str]) -> int:
    """Fold the days this conversation touched into their summaries; a past (imported) day is
    finalised. A day's other imported conversations are folded in too: they are stored already."""
    updated = 0
    for segment_id in work.segment_ids:
        for _ in range(_FOLDS_PER_DAY):
            async with ctx.sessions() as session:
                fold = await pending_fold(session, segment_id)
                kinds = await _kinds(session, fold) if fold is not None else {}
            if fold is None:
                break
            # A past day is final once its last lines are in (a long day takes several folds).
            final = fold.segment.status == IMPORTED_DAY and len(fold.messages) < FOLD_LINES
            if not fold.messages:
                if final:
                    async with ctx.sessions() as session, session.begin():
                        await DaySummaryRepository(session).finalise_unchanged(segment_id, ctx.clock.now())
                break
            lines = named_lines([Line(m.id, m.role, m.content, m.sent_at) for m in fold.messages], kinds)
            draft = await draft_fold(ctx, fold, final=final, notes=notes, lines=lines, imported=True)
            async with ctx.sessions() as session, session.begin():
                stored = await store_draft(ctx, session, draft, final=final)
            updated += stored
            if not stored or final:
                break
    return updated


async def _kinds(session: AsyncSession, fold: DayFold) -> dict[int, str]:
    """The kind of each folded line's conversation, by line id (a day may hold ChatGPT's and Claude's)."""
    ids = {m.conversation_id for m in fold.messages if m.conversation_id is not None}
    rows = await session.execute(select(Conversation.id, Conversation.kind).where(Conversation.id.in_(ids)))
    kind = {int(i): str(k) for i, k in rows.all()}
    return {m.id: kind.get(m.conversation_id or 0, "") for m in fold.messages}
