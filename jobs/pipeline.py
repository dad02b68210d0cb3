"""The post-processing pipeline of one claimed conversation, every stage idempotent.

1 ingestion -> 2 extraction -> 3 threads, 4 thoughts, 5 facts (one transaction with the stored
extraction, so a rerun never calls the model again; dedupe keys) -> 6 graph -> 7 day summary rollup
(version-guarded, one note per version) -> 8 finalisation (processed, summary, tone) -> 9 the
user's briefing (jobs/briefing.py; after the conversation is processed, and never failing it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import update

from agent.core.errors import UserForgottenError
from agent.core.usage import metering, store_usage_apart
from agent.digest.extraction import Extraction, OpenThread, extract
from agent.digest.summaries import Line
from agent.proactive.plans import local_label, plans_from
from db.memory_repositories import FactRepository, ThoughtRepository, ThreadRepository
from db.models import Conversation, TranscriptMessage, User
from db.repositories import TranscriptRepository, user_present
from db.touchpoints import NewTouchpoint, TouchpointRepository
from jobs.briefing import refresh_briefing
from jobs.context import JobContext
from jobs.day_summary import summarise_segment
from jobs.queue import mark_processed

logger = logging.getLogger(__name__)

TONE_CHARS = 64


@dataclass(frozen=True)
class Ingested:
    """Stage 1's output: the conversation, its messages, its days and the user's open threads."""

    conversation_id: int
    user_id: int
    ended_at: datetime
    lines: list[Line]
    segment_ids: list[int]
    open_threads: list[OpenThread]
    stored_extraction: Extraction | None
    # The user's zone: the extraction's follow-up times are local times there.
    timezone: str = "UTC"


async def ingest(ctx: JobContext, conversation_id: int) -> Ingested | None:
    """Stage 1: load the claimed conversation, its user/assistant messages and open threads."""
    async with ctx.sessions() as session:
        conversation = await session.get(Conversation, conversation_id)
        if conversation is None:
            return None
        rows: list[TranscriptMessage] = [
            m
            for m in await TranscriptRepository(session).for_conversation(conversation_id)
            if m.role != "system"
        ]
        stored = Extraction.model_validate(conversation.extraction) if conversation.extraction else None
        threads = [] if stored or not rows else await ThreadRepository(session).open_for(conversation.user_id)
        user = await session.get(User, conversation.user_id)
        return Ingested(
            conversation_id=conversation.id,
            user_id=conversation.user_id,
            ended_at=conversation.ended_at or conversation.last_message_at,
            lines=[Line(m.id, m.role, m.content, m.sent_at) for m in rows],
            segment_ids=sorted({m.day_segment_id for m in rows if m.day_segment_id is not None}),
            open_threads=[OpenThread(t.id, t.type, t.content) for t in threads],
            stored_extraction=stored,
            timezone=user.timezone if user is not None else "UTC",
        )


async def extraction_stage(ctx: JobContext, item: Ingested) -> Extraction:
    """Stage 2: one model call, unless an earlier run already stored its result."""
    if item.stored_extraction is not None:
        return item.stored_extraction
    ended = local_label(item.ended_at, item.timezone)
    return await extract(ctx.summary_model, ctx.settings, item.lines, item.open_threads, ended_local=ended)


async def memory_stage(ctx: JobContext, item: Ingested, output: Extraction) -> dict[str, int]:
    """Stages 3-5: threads opened and resolved, thoughts, facts, with the extraction checkpoint.

    One transaction: the extraction is stored with the rows it produced, so a rerun reuses it
    instead of calling the model again, and the dedupe keys make a repeated write a no-op.
    """
    at = item.ended_at
    async with ctx.sessions() as session, session.begin():
        if not await user_present(session, item.user_id):
            raise UserForgottenError(f"user {item.user_id} was forgotten")
        if item.stored_extraction is None:
            await session.execute(
                update(Conversation)
                .where(Conversation.id == item.conversation_id)
                .values(extraction=output.model_dump(mode="json"))
                .execution_options(synchronize_session=False)
            )
        threads = ThreadRepository(session)
        resolved = await threads.resolve(item.user_id, output.resolved_thread_ids, item.conversation_id, at)
        opened = await threads.open_threads(
            item.user_id, item.conversation_id, [(t.type, t.content) for t in output.threads_to_open], at
        )
        thoughts = await ThoughtRepository(session).add_many(
            item.user_id, item.conversation_id, output.thoughts, at
        )
        facts = await FactRepository(session).add_sourced(
            item.user_id,
            item.conversation_id,
            [(f.text, f.message_ids) for f in output.user_facts],
            at,
            source="extraction",
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
    return {
        "threads_opened": opened,
        "threads_resolved": resolved,
        "thoughts": thoughts,
        "facts": facts,
        "follow_ups_planned": planned,
    }


async def graph_stage(ctx: JobContext, item: Ingested, output: Extraction) -> int:
    """Stage 6: knowledge-graph episodes (user facts, shared history, the persona's thoughts).

    The graph is idempotent per `source_id`, so a rerun adds nothing twice. Off when ctx.graph is None.
    Each write checks that the user still exists (ctx.graph is guarded, agent/graph/guarded.py).
    """
    if ctx.graph is None:
        return 0
    source = f"conversation:{item.conversation_id}"
    episodes = [
        ("user", "user facts", [f.text for f in output.user_facts]),
        ("relationship", "conversation", [output.summary, *output.key_moments]),
        ("persona", "thoughts", output.thoughts[:2]),
    ]
    added = 0
    for group, name, lines in episodes:
        lines = [line for line in lines if line.strip()]
        if not lines:
            continue
        # The extraction's facts are written as they are (one graph call per fact at most), not
        # extracted by graphiti a second time.
        await ctx.graph.add_episode(
            user_id=item.user_id,
            group=group,
            name=f"{name} ({source})",
            body="\n".join(lines),
            reference_time=item.ended_at,
            source_id=f"{source}:{group}",
            facts=lines,
        )
        added += 1
    return added


async def rollup_stage(ctx: JobContext, item: Ingested, output: Extraction) -> int:
    """Stage 7: fold the conversation into the summary of each day it touched."""
    updated = 0
    for segment_id in item.segment_ids:
        updated += await summarise_segment(ctx, segment_id, notes=[output.summary])
    return updated


async def finalise(ctx: JobContext, item: Ingested, output: Extraction | None) -> bool:
    """Stage 8: processed, with the summary and tone, if this worker still holds the claim."""
    async with ctx.sessions() as session, session.begin():
        return await mark_processed(
            session,
            item.conversation_id,
            ctx.worker_id,
            ctx.clock.now(),
            summary=output.summary if output else None,
            tone=output.tone[:TONE_CHARS] if output else None,
        )


async def run_pipeline(ctx: JobContext, conversation_id: int) -> dict[str, int]:
    """Every stage for one claimed conversation; raises on failure (the worker retries)."""
    try:
        return await _run_stages(ctx, conversation_id)
    except UserForgottenError:
        # /forget deleted the user mid-run: their conversation went with them, nothing to retry.
        logger.info("post-processing stopped: user forgotten", extra={"conversation_id": conversation_id})
        return {"forgotten": 1}


async def _run_stages(ctx: JobContext, conversation_id: int) -> dict[str, int]:
    item = await ingest(ctx, conversation_id)
    if item is None:
        return {"missing": 1}
    if not any(line.role == "user" for line in item.lines):  # the user said nothing: nothing to learn
        await finalise(ctx, item, None)
        return {"empty": 1}
    # Extraction and the graph's model calls count towards the user's usage, failed runs included.
    with metering() as meter:
        try:
            output = await extraction_stage(ctx, item)
            counts = await memory_stage(ctx, item, output)
            counts["graph_episodes"] = await graph_stage(ctx, item, output)
        finally:
            await store_usage_apart(ctx.sessions, item.user_id, ctx.clock.now().astimezone(UTC).date(), meter)
    counts["day_summaries"] = await rollup_stage(ctx, item, output)
    counts["processed"] = int(await finalise(ctx, item, output))
    counts["briefing_written"] = await briefing_stage(ctx, item)
    return counts


async def briefing_stage(ctx: JobContext, item: Ingested) -> int:
    """Stage 9: the user's briefing from their package as it now stands (1 when a new one was stored)."""
    outcome = await refresh_briefing(
        ctx, item.user_id, trigger="conversation", conversation_id=item.conversation_id
    )
    return int(outcome == "written")
