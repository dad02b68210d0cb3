"""Post-processing of an imported conversation: facts only from the person's own lines (never from
what ChatGPT said), at their lines' own times, into the same list and profile; its days summarised
as the person's talk with ChatGPT and finalised; nothing a live talk opens; its cost metered as
"import"; on both databases."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.tokens import get_counter
from agent.memory.profile import load_profile
from agent.memory.provenance import explain, source_text
from agent.reports.texts import stats_report
from bench.clock import FrozenClock
from db.models import (
    Conversation,
    ConversationThread,
    DaySegment,
    ModelUsage,
    Thought,
    Touchpoint,
    UserFact,
)
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.import_queue import ImportQueueRepository
from jobs.context import JobContext
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, extraction_reply
from tests.jobs.import_helpers import import_run, imported_conversation, person

pytestmark = pytest.mark.both_databases

ASKED = datetime(2024, 3, 12, 18, 30, tzinfo=UTC)


async def _count(sessions: async_sessionmaker[AsyncSession], model: type, user_id: int) -> int:
    async with sessions() as session:
        stmt = select(func.count()).select_from(model).where(model.user_id == user_id)  # type: ignore[attr-defined]
        return int(await session.scalar(stmt) or 0)


async def test_an_imported_conversation_teaches_only_what_the_person_said(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ana = await person(sessions, "cli:ana", now=clock.now(), timezone="Europe/Lisbon")
    run = await import_run(sessions, ana, at=clock.now())
    conversation, (asked, answered, thanked) = await imported_conversation(
        sessions,
        ana,
        run,
        [
            ("user", "I play the cello; what should I cook for my quartet tonight?", ASKED),
            ("other", "As a vegetarian you might enjoy a mushroom risotto.", ASKED + timedelta(minutes=1)),
            ("user", "thanks, sounds good", ASKED + timedelta(minutes=3)),
        ],
        timezone="Europe/Lisbon",
        today=clock.now(),
    )
    scripted.extraction = extraction_reply(
        user_facts=[
            {"text": "Ana plays the cello", "message_ids": [asked]},
            {"text": "Ana is a vegetarian", "message_ids": [answered]},  # ChatGPT said it, she never did
            {"text": "Ana eats no meat", "message_ids": [answered], "agreed_in": thanked},
        ],
        summary="Ana asked ChatGPT what to cook for her quartet.",
    )

    with caplog.at_level(logging.INFO, logger="agent.memory.grounding"):
        assert (await run_job("imports", ctx))["queued"] == 1
        assert (await run_job("postprocess", ctx))["processed"] == 1

    # The extraction read ChatGPT's line by its name, never as the companion's (or the person's).
    [prompt] = scripted.extraction_prompts
    assert f"[#{answered} 18:31 ChatGPT] As a vegetarian" in prompt
    assert f"[#{asked} 18:30 user] I play the cello" in prompt
    assert " assistant]" not in prompt
    # A fact standing only on ChatGPT's line is not hers, and is counted as such.
    dropped = [r for r in caplog.records if r.getMessage() == "facts not grounded"]
    assert [r.reasons for r in dropped] == [{"other_assistant": 1}]  # type: ignore[attr-defined]

    async with sessions() as session:
        facts = (await session.scalars(select(UserFact).where(UserFact.user_id == ana))).all()
    by_text = {f.content: f for f in facts}
    # "eats no meat" stood on her agreeing line; "vegetarian" only on ChatGPT's.
    assert set(by_text) == {"Ana plays the cello", "Ana eats no meat"}
    cello = by_text["Ana plays the cello"]
    assert (cello.message_ids, cello.source) == ([asked], "import")
    # Learned when she said it, not when the job ran.
    assert cello.created_at.replace(tzinfo=UTC) == ASKED
    assert by_text["Ana eats no meat"].created_at.replace(tzinfo=UTC) == ASKED + timedelta(minutes=3)

    # The next conversation's profile knows it.
    async with sessions() as session:
        profile = await load_profile(
            session, ana, anchor=clock.now(), budget_tokens=700, count=get_counter().count
        )
    assert "Ana plays the cello" in "\n".join(profile.lines())
    assert "vegetarian" not in "\n".join(profile.lines())

    # Asked where it comes from, the bot says she told ChatGPT, on her day.
    [why] = await explain(sessions, ana, ZoneInfo("Europe/Lisbon"), fact_id=cello.id)
    assert source_text(why.sources).startswith("you told ChatGPT on 12 Mar 2024: “I play the cello;")
    assert why.as_dict()["lines"][0]["told"] == "ChatGPT"

    # An old talk with someone else opens nothing.
    for model in (ConversationThread, Thought, Touchpoint):
        assert await _count(sessions, model, ana) == 0
    assert scripted.briefing_prompts == []

    # Its day (in her zone) is summarised as her talk with ChatGPT, and final.
    [summary_prompt] = scripted.summary_prompts
    assert "Day: 2024-03-12" in summary_prompt and "ChatGPT] As a vegetarian" in summary_prompt
    async with sessions() as session:
        day = await session.scalar(select(DaySegment).where(DaySegment.user_id == ana))
        row = await session.get(Conversation, conversation)
        usage = {u.kind: u for u in (await session.scalars(select(ModelUsage))).all()}
    assert day is not None and (day.status, day.day.isoformat()) == ("final", "2024-03-12")
    assert day.summary and row is not None and row.status == "processed"
    # A rewrite she asks for in the timeline reads ChatGPT's lines as another assistant's, once.
    async with sessions() as session, session.begin():
        assert await DaySummaryRepository(session).request_regeneration(day.id, clock.now())
    assert (await run_job("day-summaries", ctx))["updated"] == 1
    assert "another assistant (imported chat)] As a vegetarian" in scripted.summary_prompts[-1]
    assert (await run_job("day-summaries", ctx))["due"] == 0
    async with sessions() as session:
        rewritten = await session.get(DaySegment, day.id)
    assert rewritten is not None and rewritten.status == "final"
    async with sessions() as session:
        usage = {u.kind: u for u in (await session.scalars(select(ModelUsage))).all()}
    assert usage["day_summary"].calls == 1  # she asked for it: her own day's use
    del usage["day_summary"]

    # Both calls are metered as the import's, apart from chat and the live post-processing, and
    # /stats shows them apart.
    assert set(usage) == {"import"} and usage["import"].calls == 2
    stats = await stats_report(sessions, clock.now(), queue_depth=None, failures=None, settings=ctx.settings)
    assert "model use today (UTC): 1 calls" in stats and "(day_summary 1)" in stats
    assert "imports (apart from the above): 0 imported conversations waiting; today (UTC) 2 calls" in stats
    assert "(import 2)" in stats and "  import: " in stats
    # What the last progress message can tell.
    async with sessions() as session:
        progress = await ImportQueueRepository(session).progress(ana, run)
        others = await ImportQueueRepository(session).progress(ana + 1, run)
    assert (progress.statuses, progress.facts, progress.days, progress.done) == ({"processed": 1}, 2, 1, True)
    assert (others.statuses, others.facts, others.days) == ({}, 0, 0)


async def test_an_imported_conversation_without_the_persons_lines_still_gets_its_day(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    ana = await person(sessions, "cli:ana", now=clock.now())
    run = await import_run(sessions, ana, at=clock.now(), source="claude")
    await imported_conversation(
        sessions, ana, run, [("other", "Hello! How can I help?", ASKED)], source="claude", today=clock.now()
    )
    await run_job("imports", ctx)
    assert (await run_job("postprocess", ctx))["processed"] == 1
    assert scripted.extraction_prompts == []
    [summary_prompt] = scripted.summary_prompts
    assert "Claude] Hello!" in summary_prompt
    assert await _count(sessions, UserFact, ana) == 0
