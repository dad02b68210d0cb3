"""The graph's shared-history and persona groups follow their rows as the user group follows the
list: a final day's key moments and the persona's thoughts written by the `graph` job, a rewritten
day's old edge ended, reads counting through the rows, each person's own, across a crash; tidying
left alone. Real embedded FalkorDB, graphiti's model scripted, on both databases."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.graph import STANDARD_LIMITS
from agent.graph.base import GraphResults
from agent.graph.graphiti_backend import GraphitiGraph
from agent.memory.graph import GraphFacts
from bench.clock import FrozenClock
from db.models import Conversation, DaySegment
from db.repositories.consolidations import GRAPH, TIDYING, ConsolidationRepository, PersonWork
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.graph_work import record_shown, unshown
from db.repositories.imports import DaySpan, ImportRepository
from db.repositories.thoughts import ThoughtRepository
from jobs.registry import run_job
from tests.agent.graph.conftest import GraphFactory, graph, graph_path, open_graph
from tests.agent.graph.test_forget_race import Gate, GatedEmbedder

from .test_graph import ContextOn, context_on
from .tidy_helpers import owner, say

pytestmark = [pytest.mark.both_databases, pytest.mark.process]
__all__ = ["context_on", "graph", "graph_path", "open_graph"]

Sessions = async_sessionmaker[AsyncSession]


async def think(sessions: Sessions, user_id: int, thoughts: Sequence[str], at: datetime) -> None:
    """The persona's thoughts after a conversation, as post-processing stores them."""
    async with sessions() as session, session.begin():
        talk = Conversation(user_id=user_id, status="processed", started_at=at, last_message_at=at)
        session.add(talk)
        await session.flush()
        await ThoughtRepository(session).add_many(user_id, talk.id, thoughts, at)


async def final_day(sessions: Sessions, user_id: int, moments: Sequence[str], at: datetime) -> int:
    """A day summarised and closed with these key moments, as the nightly does; its id."""
    async with sessions() as session, session.begin():
        day = DaySegment(
            user_id=user_id, day=at.date(), timezone="UTC", first_message_at=at, last_message_at=at
        )
        session.add(day)
        await session.flush()
        await summarise(session, day, moments, at, final=True)
        return day.id


async def summarise(
    session: AsyncSession, day: DaySegment, moments: Sequence[str], at: datetime, *, final: bool
) -> None:
    """A new summary version of the day (a rewrite the person asked for unless `final`)."""
    assert await DaySummaryRepository(session).store(
        day,
        expected_last_id=None,
        summary="A day.",
        key_moments=[{"text": m, "message_id": None} for m in moments],
        last_message=None,
        at=at,
        final=final,
        regenerated=not final,
    )


async def claims(sessions: Sessions, kind: PersonWork, clock: FrozenClock) -> int | None:
    """Who this kind of work claims now (finished at once), or None."""
    async with sessions() as session, session.begin():
        work = ConsolidationRepository(session, kind)
        claim = await work.claim(clock.now(), timedelta(minutes=1), max_attempts=3)
        if claim is not None:
            await work.finish(claim, clock.now(), up_to=claim.seen)
        return claim.user_id if claim is not None else None


def texts(found: GraphResults) -> dict[str, list[str]]:
    return {
        "relationship": sorted(f.text for f in found.relationship),
        "persona": sorted(f.text for f in found.persona),
    }


async def test_a_thought_or_a_final_day_marks_the_graph_and_not_tidying(
    sessions: Sessions, clock: FrozenClock
) -> None:
    ana, bo = await owner(sessions, "Ana", clock.now()), await owner(sessions, "Bo", clock.now())
    await say(sessions, ana, ["Ana plays the cello"], clock.now())
    assert await claims(sessions, TIDYING, clock) == ana
    assert await claims(sessions, GRAPH, clock) == ana
    clock.advance(timedelta(minutes=5))
    await think(sessions, ana, ["I wonder how Ana's concert went"], clock.now())
    await final_day(sessions, bo, ["Bo told Nikita about his garden"], clock.now())
    # Neither person's facts changed: tidying claims nobody; the graph claims both.
    assert await claims(sessions, TIDYING, clock) is None
    assert {await claims(sessions, GRAPH, clock), await claims(sessions, GRAPH, clock)} == {ana, bo}
    assert await claims(sessions, GRAPH, clock) is None
    # A fact said again still makes tidying due.
    await say(sessions, bo, ["Bo keeps bees"], clock.now())
    assert await claims(sessions, TIDYING, clock) == bo
    assert await claims(sessions, GRAPH, clock) == bo

    # An import brings lines into Bo's shown day: it leaves the shared history, and the graph is told.
    async with sessions() as session, session.begin():
        (due,) = [d for d in await unshown(session, bo) if d.group == "relationship"]
        await record_shown(session, bo, {("relationship", due.row.id): due.words})
        span = DaySpan(clock.now(), clock.now())
        await ImportRepository(session).open_days(
            bo, {due.row.day: span}, "UTC", today=due.row.day + timedelta(days=1)
        )
    assert await claims(sessions, TIDYING, clock) is None
    assert await claims(sessions, GRAPH, clock) == bo
    async with sessions() as session:
        days = [d for d in await unshown(session, bo) if d.group == "relationship"]
    assert [(d.held, d.shown is not None) for d in days] == [(False, True)]  # its edge is to end


async def test_moments_and_thoughts_reach_their_groups_and_reads_follow_their_rows(
    sessions: Sessions, clock: FrozenClock, graph: GraphitiGraph, context_on: ContextOn
) -> None:
    ctx = context_on(graph)
    reads = GraphFacts(graph, clock=clock, timeout_seconds=30, sessions=sessions)
    ana, bo = await owner(sessions, "Ana", clock.now()), await owner(sessions, "Bo", clock.now())
    day = await final_day(sessions, ana, ["Ana and Nikita planned a trip to Lisbon"], clock.now())
    await final_day(sessions, bo, ["Bo told Nikita about his secret garden in Lisbon"], clock.now())
    await think(sessions, ana, ["Ana seemed nervous about the Lisbon trip"], clock.now())

    counts = await run_job("graph", ctx)
    assert (counts["claimed"], counts["written"]) == (2, 3)
    assert texts(await reads.search(ana, "Lisbon trip garden", limits=STANDARD_LIMITS, now=clock.now())) == {
        "relationship": ["Ana and Nikita planned a trip to Lisbon"],
        "persona": ["Ana seemed nervous about the Lisbon trip"],
    }
    groups = (await graph.export_user(ana))["groups"]
    assert [e["name"] for e in groups["relationship"]["episodes"]] == [f"moments:{day} messages:"]
    assert [e["name"].split()[0][:8] for e in groups["persona"]["episodes"]] == ["thought:"]

    # The day's summary is rewritten: its old moment shows nothing from then on, even before the
    # graph follows, and its edge ends when the graph does.
    clock.advance(timedelta(hours=1))
    async with sessions() as session, session.begin():
        row = await session.get(DaySegment, day)
        assert row is not None
        await summarise(
            session, row, ["Ana and Nikita laughed about the rain in Porto"], clock.now(), final=False
        )
    found = await reads.search(ana, "Lisbon trip", limits=STANDARD_LIMITS, now=clock.now())
    assert found.relationship == [] and len(found.persona) == 1
    assert (await run_job("graph", ctx))["written"] == 1
    raw = await graph.search(ana, "Lisbon trip Porto rain", limits=STANDARD_LIMITS, now=clock.now())
    assert [f.text for f in raw.relationship] == ["Ana and Nikita laughed about the rain in Porto"]
    assert [f.row_ids for f in raw.relationship] == [(day,)]
    assert (await run_job("graph", ctx))["claimed"] == 0
    # Written again from the rows: the day's moments as they stand and the thought.
    assert await reads.rebuild(ana) == 2
    assert texts(await reads.search(ana, "Lisbon Porto rain", limits=STANDARD_LIMITS, now=clock.now())) == {
        "relationship": ["Ana and Nikita laughed about the rain in Porto"],
        "persona": ["Ana seemed nervous about the Lisbon trip"],
    }

    # Bo's own moment is his alone.
    bos = await reads.search(bo, "Lisbon garden", limits=STANDARD_LIMITS, now=clock.now())
    assert texts(bos) == {"relationship": ["Bo told Nikita about his secret garden in Lisbon"], "persona": []}


async def test_a_thought_a_crash_interrupted_is_written_once_after_the_lease(
    sessions: Sessions, clock: FrozenClock, open_graph: GraphFactory, context_on: ContextOn
) -> None:
    gate = Gate("Zanzibar")
    graph = await open_graph(embedder=GatedEmbedder(gate))
    ctx = context_on(graph)
    ana = await owner(sessions, "Ana", clock.now())
    await think(sessions, ana, ["Ana would love sailing to Crete"], clock.now())
    assert (await run_job("graph", ctx))["written"] == 1
    await think(sessions, ana, ["Ana would love sailing to Zanzibar"], clock.now())
    # The worker dies inside the graph write (its task cancelled while the thought is embedded).
    dying = asyncio.create_task(run_job("graph", ctx))
    await asyncio.wait_for(gate.entered.wait(), 30)
    dying.cancel()
    with pytest.raises(asyncio.CancelledError):
        await dying
    gate.release.set()
    assert (await run_job("graph", ctx))["claimed"] == 0  # its lease still holds Ana
    clock.advance(timedelta(seconds=ctx.settings.postprocess_claim_timeout_seconds + 1))
    assert (await run_job("graph", ctx))["written"] == 1
    found = await graph.search(ana, "sailing", limits=STANDARD_LIMITS, now=clock.now())
    assert sorted(f.text for f in found.persona) == [
        "Ana would love sailing to Crete",
        "Ana would love sailing to Zanzibar",
    ]
    assert len((await graph.export_user(ana))["groups"]["persona"]["episodes"]) == 2
    assert (await run_job("graph", ctx))["claimed"] == 0
