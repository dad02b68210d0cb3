"""The post-processing pipeline of one claimed conversation, every stage idempotent.

1 ingestion -> 2 extraction -> 3 threads, 4 thoughts, 5 facts (one transaction with the stored
extraction and its cost, so a rerun never calls the model again; dedupe keys; the knowledge graph
follows the facts through jobs/graph.py) -> 6 day summary rollup (version-guarded, one note per
version) -> 7 finalisation (processed, summary, tone; in the rollup's last transaction) -> 8 the
user's briefing (jobs/briefing_refresh.py; after the conversation is processed, and never failing it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.account.groups import GROUP
from agent.context.package import THOUGHTS_MAX
from agent.core.clock import local_label
from agent.core.errors import UserForgottenError
from agent.core.usage import UsageMeter, metering, store_usage, store_usage_apart
from agent.digest.extraction import Extraction, OpenThread, ShownThought, extract, ground_facts
from agent.digest.summaries import Line
from agent.history.reactions import reactions_on, with_reactions
from agent.memory.corrections import without_taken_back
from agent.memory.grounding import dropped
from agent.memory.known import apply_decisions
from agent.memory.profile import ProfileFact
from agent.touchpoints.plans import plans_from
from db.models import IMPORTED_KINDS, Conversation, ConversationThread, Thought, TranscriptMessage, User
from db.repositories.facts import FactRepository
from db.repositories.thoughts import ThoughtRepository
from db.repositories.threads import ThreadRepository
from db.repositories.touchpoints import NewTouchpoint, TouchpointRepository
from db.repositories.transcript import TranscriptRepository
from jobs.briefing_refresh import refresh_briefing
from jobs.context import JobContext
from jobs.day_summary import DayFold, draft_fold, pending_fold, store_draft
from jobs.imported import keep_extraction, run_imported
from jobs.queue import Ingested, mark_processed

logger = logging.getLogger(__name__)

TONE_CHARS = 64


@dataclass(frozen=True)
class Loaded:
    """Stage 1's rows: read in the claim's own transaction by the worker, or in a session of their own."""

    conversation: Conversation
    timezone: str
    messages: list[TranscriptMessage]
    open_threads: list[ConversationThread]
    thoughts: Sequence[Thought] = ()
    # The emoji the person put on each answer (by transcript id): the extraction sees them.
    reactions: Mapping[int, Sequence[str]] = field(default_factory=dict)
    group: bool = False
    known: Sequence[ProfileFact] = ()
    language: str | None = None


async def load(session: AsyncSession, conversation_id: int) -> Loaded | None:
    """Read the conversation, its user's zone, its user/assistant messages and open threads."""
    found = (
        await session.execute(
            select(Conversation, User.timezone, User.kind, User.language)
            .join(User, User.id == Conversation.user_id)
            .where(Conversation.id == conversation_id)
        )
    ).one_or_none()
    if found is None:
        return None
    conversation, timezone, kind, language = found
    messages = [
        m for m in await TranscriptRepository(session).for_conversation(conversation_id) if m.role != "system"
    ]
    # A stored extraction is reused as it is: the threads are only shown to a new extraction.
    needs_threads = messages and not conversation.extraction
    threads = list(await ThreadRepository(session).open_for(conversation.user_id)) if needs_threads else []
    thoughts = (
        await ThoughtRepository(session).unshared(conversation.user_id, limit=THOUGHTS_MAX)
        if needs_threads
        else ()
    )
    answers = [m.id for m in messages if m.role == "assistant"]
    reactions = await reactions_on(session, conversation.user_id, answers) if needs_threads else {}
    rows = await FactRepository(session).held_rows(conversation.user_id) if needs_threads else []
    known = [ProfileFact(*row) for row in rows]
    return Loaded(
        conversation, timezone, messages, threads, thoughts, reactions, kind == GROUP, known, language
    )


def ingested(loaded: Loaded) -> Ingested:
    """Stage 1's output from its rows (a stored extraction that no longer validates raises here)."""
    conversation, rows = loaded.conversation, loaded.messages
    return Ingested(
        conversation_id=conversation.id,
        user_id=conversation.user_id,
        ended_at=conversation.ended_at or conversation.last_message_at,
        lines=[
            Line(
                m.id,
                m.role,
                with_reactions(m.content, loaded.reactions.get(m.id)),
                m.sent_at,
                m.speaker_name,
                m.speaker_telegram_id,
            )
            for m in rows
        ],
        segment_ids=sorted({m.day_segment_id for m in rows if m.day_segment_id is not None}),
        open_threads=[OpenThread(t.id, t.type, t.content) for t in loaded.open_threads],
        stored_extraction=(
            Extraction.model_validate(conversation.extraction) if conversation.extraction else None
        ),
        timezone=loaded.timezone,
        thoughts=[ShownThought(t.id, t.content) for t in loaded.thoughts],
        group=loaded.group,
        known=loaded.known,
        language=loaded.language,
        kind=conversation.kind,
    )


async def ingest(ctx: JobContext, conversation_id: int) -> Ingested | None:
    """Stage 1: load the claimed conversation, its user/assistant messages and open threads."""
    async with ctx.sessions() as session:
        loaded = await load(session, conversation_id)
    return ingested(loaded) if loaded is not None else None


async def extraction_stage(ctx: JobContext, item: Ingested) -> Extraction:
    """Stage 2: one model call, unless an earlier run already stored its result (whose facts are
    held to the person's own lines again: one stored by an older version may cite anything)."""
    if item.stored_extraction is not None:
        reasons = ground_facts(item.stored_extraction, item.lines, group=item.group)
        dropped(reasons, writer="extraction", owner_id=item.user_id, conversation_id=item.conversation_id)
        return item.stored_extraction
    ended = local_label(item.ended_at, item.timezone)
    return await extract(
        ctx.summary_model,
        ctx.settings,
        item.lines,
        item.open_threads,
        ended_local=ended,
        thoughts=item.thoughts,
        group=item.group,
        known=item.known,
        language=item.language,
        owner=(item.user_id, item.conversation_id),
    )


@dataclass(frozen=True)
class RollupStart:
    """What the rollup found to fold; `processed` is set when there was nothing and it finalised."""

    folds: list[DayFold]
    processed: bool | None


async def memory_stage(
    ctx: JobContext, item: Ingested, output: Extraction, meter: UsageMeter
) -> tuple[dict[str, int], RollupStart | None]:
    """Stages 3-5: threads opened and resolved, thoughts, facts, with the extraction checkpoint.

    One transaction: the extraction is stored with the rows it produced and with what it cost
    (`meter`), so a rerun reuses it instead of calling the model again, and the dedupe keys make a
    repeated write a no-op. The rollup's start runs in it too: the days' new messages are read
    and, when there are none, the conversation is finalised in the same commit.
    """
    at = item.ended_at
    async with ctx.sessions() as session, session.begin():
        await keep_extraction(session, item, output)
        threads = ThreadRepository(session)
        resolved = await threads.resolve(item.user_id, output.resolved_thread_ids, item.conversation_id, at)
        opened = await threads.open_threads(
            item.user_id, item.conversation_id, [(t.type, t.content) for t in output.threads_to_open], at
        )
        thoughts = ThoughtRepository(session)
        shared = await thoughts.mark_used(item.user_id, output.shared_thought_ids, at)
        added = await thoughts.add_many(item.user_id, item.conversation_id, output.thoughts, at)
        # What the user took back is not learned again from the messages it came from; the rest is
        # stored as extraction decided against the known facts (agent/memory/known.py).
        said = [(f.text, f.message_ids) for f in output.user_facts]
        kept = [output.user_facts[i] for i in await without_taken_back(session, item.user_id, said, at=at)]
        decided = [f.decided(item.timezone) for f in kept]
        facts = await apply_decisions(
            session, item.user_id, item.conversation_id, decided, at, source="extraction"
        )
        plans = plans_from(
            output.threads_to_open, conversation_id=item.conversation_id, timezone=item.timezone, after=at
        )
        planned = await TouchpointRepository(session).plan(
            item.user_id,
            item.conversation_id,
            item.timezone,
            [NewTouchpoint(p.thread_key, p.reason, p.due_at, p.dedupe_key) for p in plans],
            at=ctx.clock.now(),
        )
        start = await _rollup_start(ctx, session, item, output)
        # Last: it locks the day's token counter until the commit (agent/core/usage.py).
        await store_usage(session, item.user_id, ctx.clock.now().astimezone(UTC).date(), meter)
    counts = {
        "threads_opened": opened,
        "threads_resolved": resolved,
        "thoughts": added,
        "thoughts_shared": shared,
        **facts.counts(),
        "follow_ups_planned": planned,
    }
    return counts, start


async def rollup_stage(
    ctx: JobContext, item: Ingested, output: Extraction, start: RollupStart | None = None
) -> tuple[int, bool]:
    """Stages 7 and 8: fold the conversation into each day it touched, then finalise.

    The finalisation shares the last write: the last day's new summary when there is one, else the
    transaction that found nothing new to fold (`start`, when the memory stage's was that one). A
    day summary stored before a failure stays (its version guard makes the rerun skip it);
    `processed` is only ever written with or after them.
    """
    if start is None:
        async with ctx.sessions() as session, session.begin():
            start = await _rollup_start(ctx, session, item, output)
    if start.processed is not None:
        return 0, start.processed
    updated = 0
    for index, fold in enumerate(start.folds):
        draft = await draft_fold(ctx, fold, final=False, notes=[output.summary])
        async with ctx.sessions() as session, session.begin():
            # The last fold commits with the finalisation, written first: the draft's usage is
            # the transaction's last write (agent/core/usage.py).
            last = index == len(start.folds) - 1
            processed = await _mark_processed(ctx, session, item, output) if last else False
            updated += await store_draft(ctx, session, draft, final=False)
            if last:
                return updated, processed
    raise AssertionError("unreachable: the last fold returns")


async def _rollup_start(
    ctx: JobContext, session: AsyncSession, item: Ingested, output: Extraction
) -> RollupStart:
    folds = [fold for segment_id in item.segment_ids if (fold := await pending_fold(session, segment_id))]
    folds = [fold for fold in folds if fold.messages]
    if folds:
        return RollupStart(folds, None)
    return RollupStart([], await _mark_processed(ctx, session, item, output))


async def finalise(ctx: JobContext, item: Ingested, output: Extraction | None) -> bool:
    """Stage 8 alone (nothing to learn): processed, if this worker still holds the claim."""
    async with ctx.sessions() as session, session.begin():
        return await _mark_processed(ctx, session, item, output)


async def _mark_processed(
    ctx: JobContext, session: AsyncSession, item: Ingested, output: Extraction | None
) -> bool:
    # A slow worker whose claim was taken over finalises nothing.
    return await mark_processed(
        session,
        item.conversation_id,
        ctx.worker_id,
        ctx.clock.now(),
        summary=output.summary if output else None,
        tone=output.tone[:TONE_CHARS] if output else None,
    )


async def run_pipeline(
    ctx: JobContext, conversation_id: int, *, loaded: Loaded | None = None
) -> dict[str, int]:
    """Every stage for one claimed conversation; raises on failure (the worker retries).

    `loaded`: stage 1's rows when the claim already read them.
    """
    try:
        return await _run_stages(ctx, conversation_id, loaded)
    except UserForgottenError:
        # /forget deleted the user mid-run: their conversation went with them, nothing to retry.
        logger.info("post-processing stopped: user forgotten", extra={"conversation_id": conversation_id})
        return {"forgotten": 1}


async def _run_stages(ctx: JobContext, conversation_id: int, loaded: Loaded | None) -> dict[str, int]:
    item = ingested(loaded) if loaded is not None else await ingest(ctx, conversation_id)
    if item is None:
        return {"missing": 1}
    if item.kind in IMPORTED_KINDS:  # another assistant's history: its facts and days, nothing else
        return await run_imported(ctx, item)
    if not any(line.role == "user" for line in item.lines):  # the user said nothing: nothing to learn
        await finalise(ctx, item, None)
        return {"empty": 1}
    # Extraction's model calls count towards the user's usage, failed runs included: with the rows
    # it produced, or in a transaction of their own when the memory stage failed.
    with metering() as meter:
        try:
            output = await extraction_stage(ctx, item)
            counts, start = await memory_stage(ctx, item, output, meter)
            meter.kinds.clear()  # stored with the memory stage's rows
        finally:
            await store_usage_apart(ctx.sessions, item.user_id, ctx.clock.now().astimezone(UTC).date(), meter)
    counts["day_summaries"], processed = await rollup_stage(ctx, item, output, start)
    counts["processed"] = int(processed)
    counts["briefing_written"] = await briefing_stage(ctx, item)
    return counts


async def briefing_stage(ctx: JobContext, item: Ingested) -> int:
    """Stage 9: the user's briefing from their package as it now stands (1 when a new one was stored)."""
    outcome = await refresh_briefing(
        ctx, item.user_id, trigger="conversation", conversation_id=item.conversation_id
    )
    return int(outcome == "written")
