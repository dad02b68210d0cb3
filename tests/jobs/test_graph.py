"""The `graph` job: the knowledge graph follows the list durably, whoever changed it (the memory
tools, post-processing, tidying, an import), across a crash, on both databases. Real embedded
FalkorDB, graphiti's model scripted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from agent.graph import STANDARD_LIMITS
from agent.graph.graphiti_backend import GraphitiGraph
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedLLMClient
from db.models import ModelUsage, UserFact
from db.repositories.consolidations import GRAPH, ConsolidationRepository
from db.repositories.facts import FactRepository
from jobs.context import JobContext
from jobs.registry import run_job
from tests.agent.graph.conftest import GraphFactory, graph, graph_path, open_graph
from tests.agent.graph.test_forget_race import Gate, GatedLLM

from .conftest import ScriptedSummaries, extraction_reply
from .import_helpers import import_run, imported_conversation, person
from .tidy_helpers import Tidier, held, job_context, owner, say

pytestmark = [pytest.mark.both_databases, pytest.mark.process]
__all__ = ["graph", "graph_path", "open_graph"]


ContextOn = Callable[..., JobContext]
Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture
def context_on(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> ContextOn:
    """A job context with this graph (and this summary model)."""

    def _context(graph: GraphitiGraph, model: object = "test") -> JobContext:
        ctx = job_context(settings, engine, sessions, clock, model)
        ctx.graph = graph
        return ctx

    return _context


async def shown(graph: GraphitiGraph, user_id: int, query: str, clock: FrozenClock) -> list[str]:
    """The user group's current facts for the query."""
    found = await graph.search(user_id, query, limits=STANDARD_LIMITS, now=clock.now())
    return sorted(f.text for f in found.user)


async def test_a_graph_write_a_crash_interrupted_is_done_after_the_restart(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    open_graph: GraphFactory,
    context_on: ContextOn,
) -> None:
    gate = Gate("Zanzibar")
    graph = await open_graph(GatedLLM(gate))
    ctx = context_on(graph)
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana sails to Crete every summer"], clock.now())
    assert (await run_job("graph", ctx))["written"] == 1
    await say(sessions, ana, ["Ana sails to Zanzibar every summer"], clock.now())
    # The worker dies inside the graph write (its task cancelled while graphiti's model is called).
    dying = asyncio.create_task(run_job("graph", ctx))
    await asyncio.wait_for(gate.entered.wait(), 30)
    dying.cancel()
    with pytest.raises(asyncio.CancelledError):
        await dying
    gate.release.set()
    # Its lease still holds the person: another instance takes nothing, and nothing is lost.
    assert (await run_job("graph", ctx))["claimed"] == 0
    clock.advance(timedelta(seconds=settings.postprocess_claim_timeout_seconds + 1))
    assert (await run_job("graph", ctx))["written"] == 1
    assert await shown(graph, ana, "sails every summer", clock) == [
        "Ana sails to Crete every summer",
        "Ana sails to Zanzibar every summer",
    ]
    assert (await run_job("graph", ctx))["claimed"] == 0  # followed: nothing due


async def test_two_instances_follow_each_person_once(
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    graph: GraphitiGraph,
    context_on: ContextOn,
) -> None:
    people = [await owner(sessions, name, clock.now()) for name in ("Ana", "Bo", "Cy", "Di")]
    for person_id in people:
        await say(sessions, person_id, ["Plays the cello", "Keeps bees"], clock.now())
    first, second = context_on(graph), context_on(graph)
    second.worker_id = "worker-b"

    counts = await asyncio.gather(run_job("graph", first), run_job("graph", second))

    assert sum(c["claimed"] for c in counts) == len(people)
    assert sum(c["written"] for c in counts) == 2 * len(people)
    for person_id in people:
        episodes = (await graph.export_user(person_id))["groups"]["user"]["episodes"]
        assert len(episodes) == 2


async def test_a_forget_right_after_an_add_ends_the_edge(
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    graph: GraphitiGraph,
    context_on: ContextOn,
) -> None:
    ctx = context_on(graph)
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana has a cat named Miso", "Ana plays the cello"], clock.now())
    async with sessions() as session, session.begin():
        miso = await session.scalar(select(UserFact.id).where(UserFact.content.like("%Miso%")))
        assert miso is not None
        await FactRepository(session).invalidate(ana, [miso], clock.now(), reason="there is no cat")
    # Taken back before the graph followed: it is never shown.
    assert (await run_job("graph", ctx))["written"] == 1
    assert await shown(graph, ana, "cat Miso cello", clock) == ["Ana plays the cello"]

    # Added, followed, then taken back at once: the edge ends at the next run.
    await say(sessions, ana, ["Ana has a dog named Rex"], clock.now())
    assert (await run_job("graph", ctx))["written"] == 1
    async with sessions() as session, session.begin():
        rex = await session.scalar(select(UserFact.id).where(UserFact.content.like("%Rex%")))
        assert rex is not None
        await FactRepository(session).invalidate(ana, [rex], clock.now(), reason="no dog either")
    assert (await run_job("graph", ctx))["ended"] == 1
    assert await shown(graph, ana, "dog Rex cello", clock) == ["Ana plays the cello"]

    # Said again: the fact is held again, and so is its edge.
    clock.advance(timedelta(hours=1))
    async with sessions() as session, session.begin():
        await FactRepository(session).revive(ana, [rex], clock.now())
    assert (await run_job("graph", ctx))["written"] == 1
    assert await shown(graph, ana, "dog Rex cello", clock) == [
        "Ana has a dog named Rex",
        "Ana plays the cello",
    ]
    # The graph's model usage is the person's.
    async with sessions() as session:
        kinds = set(
            (await session.execute(select(ModelUsage.kind).where(ModelUsage.user_id == ana))).scalars()
        )
    assert kinds <= {"graph"}


async def test_tidying_merges_reach_the_graph(
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    graph: GraphitiGraph,
    context_on: ContextOn,
) -> None:
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana is a nurse.", "Ana works as a nurse", "Ana plays the cello"], clock.now())
    assert (await run_job("graph", context_on(graph)))["written"] == 3
    tidier = Tidier(
        lambda ids: {
            "same": [
                {
                    "ids": [ids["Ana is a nurse."], ids["Ana works as a nurse"]],
                    "keep": ids["Ana works as a nurse"],
                }
            ]
        }
    )
    clock.advance(timedelta(hours=1))
    ctx = context_on(graph, tidier.model())
    assert (await run_job("consolidate", ctx))["merged"] == 1
    assert await held(sessions, ana) == ["Ana works as a nurse", "Ana plays the cello"]
    # The merged fact's episode leaves the edge it shared; its own words are no fact any longer.
    assert (await run_job("graph", ctx))["ended"] == 1
    found = await graph.search(ana, "nurse", limits=STANDARD_LIMITS, now=clock.now())
    async with sessions() as session:
        kept = await session.scalar(select(UserFact.id).where(UserFact.content == "Ana works as a nurse"))
    assert {f.row_ids for f in found.user if "nurse" in f.text} <= {(kept,)}
    assert any("works as a nurse" in f.text for f in found.user)


async def test_an_imported_historys_facts_reach_the_graph(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
    open_graph: GraphFactory,
) -> None:
    ctx.graph = graph = await open_graph(ScriptedLLMClient())
    ana = await person(sessions, "cli:ana", now=clock.now())
    run = await import_run(sessions, ana, at=clock.now())
    asked = clock.now() - timedelta(days=300)
    _, (said, _) = await imported_conversation(
        sessions,
        ana,
        run,
        [
            ("user", "I play the cello in a quartet", asked),
            ("other", "How lovely!", asked + timedelta(minutes=1)),
        ],
        today=clock.now(),
    )
    scripted.extraction = extraction_reply(
        user_facts=[{"text": "Ana plays the cello", "message_ids": [said]}]
    )
    assert (await run_job("imports", ctx))["queued"] == 1
    assert (await run_job("postprocess", ctx))["processed"] == 1

    assert (await run_job("graph", ctx))["written"] == 1
    found = await graph.search(ana, "cello", limits=STANDARD_LIMITS, now=clock.now())
    async with sessions() as session:
        cello = await session.scalar(select(UserFact.id).where(UserFact.content == "Ana plays the cello"))
    assert [(f.text, f.row_ids) for f in found.user] == [("Ana plays the cello", (cello,))]
    (episode,) = (await graph.export_user(ana))["groups"]["user"]["episodes"]
    assert episode["name"] == f"fact:{cello} messages:{said}"


async def test_with_the_graph_off_nothing_waits(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    ctx = job_context(settings.model_copy(update={"graph_backend": "none"}), engine, sessions, clock, "test")
    ana = await owner(sessions, "Ana", clock.now())
    await say(sessions, ana, ["Ana plays the cello"], clock.now())
    assert (await run_job("graph", ctx))["followed"] == 1
    assert (await run_job("graph", ctx))["followed"] == 0
    async with sessions() as session, session.begin():
        due = await ConsolidationRepository(session, GRAPH).claim(
            clock.now(), timedelta(minutes=1), max_attempts=3
        )
    assert due is None
