"""The pipeline end to end on both databases: memory written once, reruns change nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.core.clock import ensure_utc
from agent.graph.base import Group, ListedFact
from bench.clock import FrozenClock
from db.models import (
    Conversation,
    ConversationThread,
    DaySegment,
    ModelUsage,
    Thought,
    TranscriptMessage,
    UserFact,
)
from db.repositories.day_summaries import DAY_SUMMARY_NOTE
from db.repositories.facts import FactRepository
from jobs.context import JobContext
from jobs.queue import requeue
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, extraction_reply, seed_conversation

pytestmark = pytest.mark.both_databases

TEXTS = ["conversation 1: my concert is on Friday", "good luck!", "and I got a job offer", "tell me more"]


async def _count(sessions: async_sessionmaker[AsyncSession], model: type) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def _notes(sessions: async_sessionmaker[AsyncSession]) -> list[TranscriptMessage]:
    async with sessions() as session:
        stmt = (
            select(TranscriptMessage).where(TranscriptMessage.kind == "note").order_by(TranscriptMessage.id)
        )
        return list((await session.execute(stmt)).scalars())


async def test_postprocess_writes_every_stage(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    user_id, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    other_id, _ = await seed_conversation(
        sessions, start=clock.now(), texts=["hi"], user_key="cli:bo", status="active"
    )
    async with sessions() as session, session.begin():
        mine = ConversationThread(
            user_id=user_id,
            type="follow_up",
            content="ask about the flat",
            dedupe_key="old",
            created_at=clock.now(),
        )
        theirs = ConversationThread(
            user_id=other_id, type="follow_up", content="Bo's secret", dedupe_key="bo", created_at=clock.now()
        )
        session.add_all([mine, theirs])
    scripted.extraction = extraction_reply(resolved_thread_ids=[mine.id, theirs.id])

    counts = await run_job("postprocess", ctx)

    assert counts == {"claimed": 1, "processed": 1, "failed": 0}
    async with sessions() as session:
        conversation = await session.get(Conversation, conversation_id)
        assert conversation is not None
        assert conversation.status == "processed"
        assert conversation.summary == "Ana talked about her concert on Friday and a job offer."
        assert conversation.tone == "warm"
        assert conversation.extraction is not None and conversation.extraction["key_moments"]
        assert conversation.processed_at == clock.now() and conversation.attempts == 1
        threads = {t.content: t for t in (await session.execute(select(ConversationThread))).scalars()}
        segment = (
            await session.execute(select(DaySegment).where(DaySegment.user_id == user_id))
        ).scalar_one()
    # Only this user's open threads can be resolved; the model saw (and named) only those.
    assert threads["ask about the flat"].status == "resolved"
    assert threads["ask about the flat"].resolved_by_conversation_id == conversation_id
    assert threads["Bo's secret"].status == "open"
    assert "[id " + str(theirs.id) + "]" not in scripted.extraction_prompts[0]
    assert "[id " + str(mine.id) + "]" in scripted.extraction_prompts[0]
    assert threads["Nikita promised to ask about the concert"].type == "promise"
    assert await _count(sessions, Thought) == 1
    assert await _count(sessions, UserFact) == 2
    # The day summary: hybrid Markdown, at most 5 key moments, one note after the summarised messages.
    assert segment.summary is not None
    for heading in ("## Summary", "## Goals", "## Decisions", "## Open loops", "## Next steps"):
        assert heading in segment.summary
    assert len(segment.key_moments) == 5
    assert segment.messages_since_summary == 0 and segment.summary_due is False
    assert "Ana talked about her concert" in scripted.summary_prompts[0]
    notes = await _notes(sessions)
    assert [(n.role, n.content, n.day_segment_id) for n in notes] == [
        ("system", DAY_SUMMARY_NOTE, segment.id)
    ]
    assert notes[0].sent_at == clock.now() + timedelta(minutes=3)


async def test_rerun_after_requeue_writes_nothing_twice(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    _, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    await run_job("postprocess", ctx)
    before = [await _count(sessions, m) for m in (ConversationThread, Thought, UserFact, TranscriptMessage)]

    counts = await run_job("postprocess", ctx, conversation_id=conversation_id)

    assert counts["processed"] == 1
    after = [await _count(sessions, m) for m in (ConversationThread, Thought, UserFact, TranscriptMessage)]
    assert after == before
    assert len(scripted.extraction_prompts) == 1  # the stored extraction is reused
    assert len(await _notes(sessions)) == 1


async def test_summary_failure_retries_without_duplicates(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    _, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    scripted.fail_summaries = 1

    first = await run_job("postprocess", ctx)

    assert first == {"claimed": 1, "processed": 0, "failed": 1}
    async with sessions() as session:
        conversation = await session.get(Conversation, conversation_id)
        segment = (await session.execute(select(DaySegment))).scalar_one()
        stored = await session.execute(select(TranscriptMessage.content).order_by(TranscriptMessage.id))
        raw = list(stored.scalars())
    assert conversation is not None and conversation.status == "closed"
    assert conversation.last_error is not None and "ModelHTTPError" in conversation.last_error
    assert segment.summary is None and raw == TEXTS  # the transcript is left as it was
    clock.advance(timedelta(seconds=ctx.settings.postprocess_retry_base_seconds + 1))

    second = await run_job("postprocess", ctx)

    assert second["processed"] == 1
    assert await _count(sessions, ConversationThread) == 2
    assert await _count(sessions, Thought) == 1
    assert len(scripted.extraction_prompts) == 1
    assert len(await _notes(sessions)) == 1


async def test_conversation_spanning_midnight_updates_both_days(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    start = clock.now().replace(hour=23, minute=58)
    await seed_conversation(sessions, start=start, texts=TEXTS)

    await run_job("postprocess", ctx)

    async with sessions() as session:
        days = (await session.execute(select(DaySegment).order_by(DaySegment.day))).scalars().all()
    assert len(days) == 2 and all(d.summary for d in days)
    assert len(await _notes(sessions)) == 2


async def test_empty_conversation_is_processed_without_a_model_call(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    _, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=[])

    assert (await run_job("postprocess", ctx))["processed"] == 1
    assert scripted.extraction_prompts == []
    assert await requeue(sessions, conversation_id, clock.now())


class RecordingGraph:
    """Stands in for the knowledge graph at its boundary: records the rows it is given, by group."""

    def __init__(self) -> None:
        self.rows: dict[tuple[Group, int], tuple[int, ListedFact]] = {}
        self.ended: list[int] = []

    async def add_facts(self, user_id: int, facts: Sequence[ListedFact], group: Group = "user") -> None:
        for fact in facts:
            self.rows[group, fact.id] = (user_id, fact)  # the same row twice: stored once, as the graph does

    async def end_facts(self, user_id: int, ids: Sequence[int], at: datetime, group: Group = "user") -> int:
        self.ended += ids
        return len(ids)


async def test_the_graph_job_sends_the_lists_facts_and_the_thoughts_with_their_ids_and_messages(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user_id, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    ctx.graph = graph = RecordingGraph()

    await run_job("postprocess", ctx)
    await run_job("postprocess", ctx, conversation_id=conversation_id)
    assert (await run_job("graph", ctx))["written"] == 3
    assert (await run_job("graph", ctx))["claimed"] == 0

    async with sessions() as session:
        held = await FactRepository(session).held(user_id)
        thoughts = (await session.scalars(select(Thought).where(Thought.user_id == user_id))).all()
    # The facts the list holds, by their ids and messages; the thought in the persona group; no
    # summary, and no key moment of a day still open.
    assert {f.content for f in held} == {"Ana lives in Lisbon", "Ana plays the cello"}
    assert {key: (owner, f.text, f.message_ids) for key, (owner, f) in graph.rows.items()} == {
        **{("user", f.id): (user_id, f.content, tuple(f.message_ids)) for f in held},
        **{("persona", t.id): (user_id, t.content, ()) for t in thoughts},
    }
    assert {ensure_utc(f.at) for _, f in graph.rows.values()} == {clock.now() + timedelta(minutes=3)}
    assert graph.ended == []


async def test_facts_are_stored_with_the_messages_they_come_from(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    _, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    _, other_conversation = await seed_conversation(
        sessions, start=clock.now(), texts=["my secret diary"], user_key="cli:bo", status="active"
    )
    async with sessions() as session:
        ids = {
            m.content: m.id
            for m in (await session.execute(select(TranscriptMessage))).scalars()
            if m.conversation_id in (conversation_id, other_conversation)
        }
    offer, concert, foreign = ids[TEXTS[2]], ids[TEXTS[0]], ids["my secret diary"]
    scripted.extraction = extraction_reply(
        user_facts=[
            {"text": "Ana got a job offer", "message_ids": [offer, foreign], "category": "identity"},
            {
                "text": "Ana plays a concert on Friday",
                "message_ids": [concert],
                "category": "plan",
                "valid_until": "2026-03-06",
            },
        ]
    )

    await run_job("postprocess", ctx)

    # The prompt names every message by its id, so the model can point at them.
    assert f"[#{offer} " in scripted.extraction_prompts[0]
    async with sessions() as session:
        facts = {f.content: f.message_ids for f in (await session.execute(select(UserFact))).scalars()}
    # Bo's message is not in Ana's conversation: never a source of her fact.
    assert facts == {"Ana got a job offer": [offer], "Ana plays a concert on Friday": [concert]}
    # What each fact is about, and a plan's day: its last moment in the person's zone (UTC here).
    async with sessions() as session:
        kinds = {
            f.content: (f.category, f.valid_until)
            for f in (await session.execute(select(UserFact))).scalars()
        }
    assert kinds["Ana got a job offer"] == ("identity", None)
    assert kinds["Ana plays a concert on Friday"] == (
        "plan",
        datetime(2026, 3, 6, 23, 59, 59, 999999, tzinfo=UTC),
    )


async def test_a_conversation_is_one_commit_after_its_claim_unless_it_folds_a_day(
    ctx: JobContext,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    # Two conversations of one day, both closed: the first folds the whole day into its summary,
    # the second finds nothing new to fold.
    await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    await seed_conversation(
        sessions, start=clock.now() + timedelta(hours=1), texts=["conversation 2: hello", "hi"]
    )
    commits: list[object] = []

    def committed(connection: object) -> None:
        commits.append(connection)

    event.listen(engine.sync_engine, "commit", committed)
    try:
        counts = await run_job("postprocess", ctx)
    finally:
        event.remove(engine.sync_engine, "commit", committed)

    assert counts == {"claimed": 2, "processed": 2, "failed": 0}
    assert len(scripted.extraction_prompts) == 2 and len(scripted.summary_prompts) == 1
    # First: claim with its reads; memory rows with the extraction's usage; the day's summary with
    # the finalisation. Second: claim; memory rows with the finalisation. Then the idle claim.
    assert len(commits) == 3 + 2 + 1
    async with sessions() as session:
        done = (await session.execute(select(Conversation).order_by(Conversation.id))).scalars().all()
        usage = (await session.execute(select(ModelUsage).order_by(ModelUsage.kind))).scalars().all()
    assert [c.status for c in done] == ["processed", "processed"]
    assert all(c.summary and c.tone for c in done)
    assert [(u.kind, u.calls) for u in usage] == [("day_summary", 1), ("extraction", 2)]
    assert len(await _notes(sessions)) == 1


async def test_a_thought_the_persona_shared_leaves_its_mind(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    user_id, conversation_id = await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    other_id, _ = await seed_conversation(
        sessions, start=clock.now(), texts=["hi"], user_key="cli:bo", status="active"
    )
    earlier = clock.now() - timedelta(days=1)
    async with sessions() as session, session.begin():
        shared = Thought(
            user_id=user_id, content="ask how the cello lessons go", dedupe_key="a", created_at=earlier
        )
        kept = Thought(
            user_id=user_id, content="tell her about the new café", dedupe_key="b", created_at=earlier
        )
        theirs = Thought(user_id=other_id, content="Bo's surprise party", dedupe_key="c", created_at=earlier)
        session.add_all([shared, kept, theirs])
    scripted.extraction = extraction_reply(shared_thought_ids=[shared.id, theirs.id, 999_999])

    assert (await run_job("postprocess", ctx))["processed"] == 1

    # The extractor saw this user's unshared thoughts, never another user's.
    prompt = scripted.extraction_prompts[0]
    assert f"[id {shared.id}] ask how the cello lessons go" in prompt
    assert f"[id {kept.id}] tell her about the new café" in prompt
    assert "Bo's surprise party" not in prompt
    async with sessions() as session:
        used = {t.content: t.used_at for t in (await session.execute(select(Thought))).scalars()}
        conversation = await session.get(Conversation, conversation_id)
    # Shared during the conversation: marked with its end, as its other memory rows are.
    assert conversation is not None and used["ask how the cello lessons go"] == conversation.ended_at
    assert used["tell her about the new café"] is None
    assert used["Bo's surprise party"] is None
    assert used["I wonder how the rehearsal went"] is None  # this conversation's new thought
