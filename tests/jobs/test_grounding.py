"""Post-processing stores a fact as the person's only when it stands on their own lines, and applies
the extraction's decision about what is already known; on both databases, private and group."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.core.clock import local_day
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.memory.listing import listing_of
from agent.memory.profile import load_profile
from bench.clock import FrozenClock
from db.models import Conversation, TranscriptMessage, UserFact
from db.repositories.day_segments import DaySegmentRepository
from db.repositories.facts import FactRepository
from db.repositories.transcript import TranscriptRepository
from jobs.context import JobContext
from jobs.registry import run_job
from tests.facts import add_facts
from tests.jobs.conftest import ScriptedSummaries, extraction_reply, seed_conversation

pytestmark = pytest.mark.both_databases

TEXTS = [
    "I play the cello in a quartet",
    "You must live in Lisbon then, and you love jazz!",
    "yes, I live in Alfama",
    "Lovely.",
]


async def _ids(sessions: async_sessionmaker[AsyncSession], conversation_id: int) -> list[int]:
    async with sessions() as session:
        rows = await session.scalars(
            select(TranscriptMessage.id)
            .where(TranscriptMessage.conversation_id == conversation_id)
            .order_by(TranscriptMessage.id)
        )
        return list(rows)


async def _facts(sessions: async_sessionmaker[AsyncSession], owner_id: int) -> dict[str, UserFact]:
    async with sessions() as session:
        rows = await session.scalars(
            select(UserFact).where(UserFact.user_id == owner_id).order_by(UserFact.id)
        )
        return {f.content: f for f in rows}


async def _seen_later(
    sessions: async_sessionmaker[AsyncSession], settings: Settings, owner_id: int, at: datetime
) -> tuple[list[str], list[str]]:
    """What /memory lists and what the next conversation's profile carries."""
    listing = await listing_of(sessions, owner_id, "UTC", now=at, settings=settings)
    async with sessions() as session:
        profile = await load_profile(
            session, owner_id, anchor=at, budget_tokens=700, count=get_counter().count
        )
    return [f.content for f in (*listing.profile, *listing.rest)], list(profile.lines())


async def test_only_the_persons_own_lines_make_their_facts(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    ana, conversation = await seed_conversation(sessions, start=clock.now(), texts=TEXTS)
    said, companion, agreed, _ = await _ids(sessions, conversation)
    scripted.extraction = extraction_reply(
        user_facts=[
            {"text": "Ana plays the cello in a quartet", "message_ids": [said, companion]},
            {"text": "Ana loves jazz", "message_ids": [companion]},  # only the companion said it
            {"text": "Ana has a cat", "message_ids": [agreed + 1000]},  # not in this conversation
            # The companion proposed it and she agreed: it stands on her agreeing line.
            {"text": "Ana lives in Lisbon", "message_ids": [companion], "agreed_in": agreed},
            # "Agreeing" on the companion's own line is no agreement.
            {"text": "Ana is a musician", "message_ids": [], "agreed_in": companion},
        ]
    )

    assert (await run_job("postprocess", ctx))["processed"] == 1

    facts = await _facts(sessions, ana)
    assert {text: f.message_ids for text, f in facts.items()} == {
        "Ana plays the cello in a quartet": [said],
        "Ana lives in Lisbon": [agreed],
    }
    listed, profile = await _seen_later(sessions, ctx.settings, ana, clock.now() + timedelta(days=1))
    for text in ("Ana loves jazz", "Ana has a cat", "Ana is a musician"):
        assert text not in listed and text not in profile
    assert "Ana lives in Lisbon" in listed and "Ana lives in Lisbon" in profile

    # An extraction stored by an older version, never checked, is held to the same rule on a rerun.
    async with sessions() as session, session.begin():
        row = await session.get(Conversation, conversation)
        assert row is not None
        row.extraction = extraction_reply(
            user_facts=["Ana loves jazz", {"text": "Ana is a musician", "message_ids": [companion]}]
        )
    assert (await run_job("postprocess", ctx, conversation_id=conversation))["processed"] == 1
    assert len(scripted.extraction_prompts) == 1  # the stored extraction was used, not the model
    assert set(await _facts(sessions, ana)) == set(facts)


async def test_a_group_members_fact_stands_on_that_members_lines(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    lines = [
        ("Ana Silva", 7, "I play the cello"),
        ("Ben", 8, "Ana has a sister in Porto"),
        (None, None, "Ben, you surely have a dog"),
        ("Ben", 8, "I do, his name is Rex"),
    ]
    group, conversation = await _group_conversation(sessions, clock.now(), lines)
    ana_line, ben_line, companion, ben_agrees = await _ids(sessions, conversation)
    scripted.extraction = extraction_reply(
        user_facts=[
            {"text": "Ana plays the cello", "message_ids": [ana_line]},
            {"text": "Ana has a sister in Porto", "message_ids": [ben_line]},  # Ben's words about Ana
            {"text": "Ben has a dog", "message_ids": [companion]},  # the companion's guess
            {"text": "Ben has a dog named Rex", "message_ids": [companion], "agreed_in": ben_agrees},
            {"text": "Ana's cello is old", "message_ids": [ana_line, ben_line]},  # both: Ana's counts
        ]
    )

    assert (await run_job("postprocess", ctx))["processed"] == 1

    facts = await _facts(sessions, group)
    assert {text: f.message_ids for text, f in facts.items()} == {
        "Ana plays the cello": [ana_line],
        "Ben has a dog named Rex": [ben_agrees],
        "Ana's cello is old": [ana_line],
    }
    listed, profile = await _seen_later(sessions, ctx.settings, group, clock.now() + timedelta(days=1))
    assert "Ana has a sister in Porto" not in listed and "Ana has a sister in Porto" not in profile


async def test_the_extraction_decides_against_the_known_facts(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    earlier = clock.now() - timedelta(days=3)
    ana, _ = await seed_conversation(sessions, start=clock.now(), texts=["x"], status="processed")
    bo, _ = await seed_conversation(
        sessions, start=clock.now(), texts=["x"], user_key="cli:bo", status="processed"
    )
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        await add_facts(
            facts,
            ana,
            None,
            ["Ana lives in Lisbon", "Ana has a cat", "Ana works at Acme", "Ana drinks coffee"],
            earlier,
            source="tool",
        )
        await add_facts(facts, ana, None, ["Ana is vegetarian"], earlier, source="tool", pinned=True)
        await add_facts(facts, bo, None, ["Bo lives in Oslo"], earlier, source="tool")
    known = {text: f.id for text, f in (await _facts(sessions, ana)).items()}
    theirs = (await _facts(sessions, bo))["Bo lives in Oslo"].id
    _, conversation = await seed_conversation(
        sessions, start=clock.now(), texts=["I moved to Porto and my cat is fine", "ok", "steak tonight!"]
    )
    said, _, later = await _ids(sessions, conversation)

    def fact(text: str, relation: str, known_id: int | None, line: int = said) -> dict[str, object]:
        return {"text": text, "message_ids": [line], "relation": relation, "known_id": known_id}

    scripted.extraction = extraction_reply(
        user_facts=[
            fact("Ana still has her cat", "same", known["Ana has a cat"]),
            fact("Ana moved to Porto", "update", known["Ana lives in Lisbon"]),
            fact("Ana eats steak", "contradiction", known["Ana is vegetarian"], later),  # pinned: both kept
            fact("Ana never drinks coffee", "contradiction", known["Ana drinks coffee"], later),
            fact("Ana likes Oslo", "update", theirs),  # another person's fact: ignored
            fact("Ana works at a school", "update", 10**9),  # no such fact: stored as new
        ]
    )

    counts = await run_job("postprocess", ctx)

    assert counts["processed"] == 1
    prompt = scripted.extraction_prompts[-1]
    assert f"[fact {known['Ana lives in Lisbon']}] Ana lives in Lisbon" in prompt
    assert "Bo lives in Oslo" not in prompt
    after = await _facts(sessions, ana)
    assert "Ana still has her cat" not in after  # the same fact: reinforced, no new row
    cat = after["Ana has a cat"]
    assert (cat.reinforced, cat.message_ids, cat.invalidated_at) == (2, [said], None)
    lisbon, porto = after["Ana lives in Lisbon"], after["Ana moved to Porto"]
    assert lisbon.superseded_by == porto.id and lisbon.invalidated_at is not None
    assert lisbon.invalid_reason == "updated by a later fact the person said"
    coffee = after["Ana drinks coffee"]
    assert coffee.superseded_by == after["Ana never drinks coffee"].id
    assert coffee.invalid_reason == "contradicted by a later fact the person said"
    assert (
        after["Ana is vegetarian"].invalidated_at is None and after["Ana eats steak"].invalidated_at is None
    )
    assert after["Ana likes Oslo"].invalidated_at is None
    assert (await _facts(sessions, bo))["Bo lives in Oslo"].invalidated_at is None
    assert after["Ana works at Acme"].invalidated_at is None and "Ana works at a school" in after

    # A rerun of the stored extraction changes nothing more.
    assert (await run_job("postprocess", ctx, conversation_id=conversation))["processed"] == 1
    again = await _facts(sessions, ana)
    assert {t: (f.reinforced, f.invalidated_at) for t, f in again.items()} == {
        t: (f.reinforced, f.invalidated_at) for t, f in after.items()
    }


async def test_in_a_group_a_decision_stays_with_the_member_it_is_about(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    lines = [("Ana", 7, "I moved to Porto"), ("Ben", 8, "I moved to Rome, and yes, still in Oslo!")]
    group, conversation = await _group_conversation(sessions, clock.now(), lines)
    async with sessions() as session, session.begin():
        await add_facts(
            FactRepository(session),
            group,
            None,
            ["Ana lives in Lisbon", "Ben plays chess"],
            clock.now() - timedelta(days=2),
            source="tool",
        )
    known = {text: f.id for text, f in (await _facts(sessions, group)).items()}
    ana_line, ben_line = await _ids(sessions, conversation)

    def fact(text: str, line: int, relation: str, known_id: int) -> dict[str, object]:
        return {"text": text, "message_ids": [line], "relation": relation, "known_id": known_id}

    scripted.extraction = extraction_reply(
        user_facts=[
            fact("Ben moved to Rome", ben_line, "update", known["Ana lives in Lisbon"]),  # Ana's, not his
            fact("Ana moved to Porto", ana_line, "update", known["Ana lives in Lisbon"]),
            fact("Ben likes chess", ben_line, "same", known["Ben plays chess"]),
        ]
    )

    assert (await run_job("postprocess", ctx))["processed"] == 1

    after = await _facts(sessions, group)
    assert after["Ana lives in Lisbon"].superseded_by == after["Ana moved to Porto"].id
    assert after["Ben moved to Rome"].invalidated_at is None
    assert after["Ben plays chess"].reinforced == 2 and "Ben likes chess" not in after


async def _group_conversation(
    sessions: async_sessionmaker[AsyncSession],
    start: datetime,
    lines: list[tuple[str | None, int | None, str]],
) -> tuple[int, int]:
    group, _ = await group_owner(sessions, chat_id=-100_777, title="Quartet", now=start, timezone="UTC")
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=group.id,
            status="closed",
            started_at=start,
            last_message_at=start + timedelta(minutes=len(lines)),
            ended_at=start + timedelta(minutes=len(lines)),
            messages=[],
            message_count=len(lines),
        )
        session.add(conversation)
        await session.flush()
        for i, (name, telegram_id, text) in enumerate(lines):
            at = start + timedelta(minutes=i)
            segment = await DaySegmentRepository(session).open(group.id, local_day(at, "UTC"), "UTC", at)
            message = await TranscriptRepository(session).add(
                user_id=group.id,
                conversation_id=conversation.id,
                role="assistant" if name is None else "user",
                content=text,
                sent_at=at,
                day_segment_id=segment.id,
                speaker_telegram_id=telegram_id,
                speaker_name=name,
            )
            DaySegmentRepository.record_message(segment, message.id, at)
        return group.id, conversation.id
