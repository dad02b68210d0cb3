"""Taking back a fact with the graph on: memory_forget ends the list's fact and the edge (its end time
set, as graphiti does), recall and memory_search leave it out at once, another user's edge is not
theirs to end, and post-processing the same conversation again does not bring it back. Real
embedded FalkorDB."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from agent.context.facts import STANDARD
from agent.graph import STANDARD_LIMITS
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from db.models import Conversation, UserFact
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, extraction_reply

from .test_wiring import Chat, OpenRuntime, open_runtime, postprocessed_user

__all__ = ["open_runtime"]


@pytest.mark.process
async def test_a_forgotten_graph_fact_leaves_the_tier_and_the_tools_and_stays_gone(
    open_runtime: OpenRuntime, clock: FrozenClock
) -> None:
    chat, scripted = Chat(), ScriptedSummaries()
    runtime = await open_runtime(chat, scripted)
    ana = await postprocessed_user(
        runtime, scripted, clock, "cli:ana", ["Ana has a cat named Miso", "Ana plays the cello"]
    )
    bo = await postprocessed_user(runtime, scripted, clock, "cli:bo", ["Bo has a cat named Rex"])
    clock.advance(timedelta(days=1))
    facts = runtime.facts
    assert facts is not None
    edges = await runtime.graph.search(ana, "cat Miso", limits=STANDARD_LIMITS, now=clock.now())
    assert any("Miso" in f.text for f in edges.user)
    assert any(
        "Miso" in line for line in await facts.for_message(ana, "cat Miso", limits=STANDARD, now=clock.now())
    )

    chat.tool_calls = [("memory_forget", {"fact": "has a cat named Miso", "reason": "there is no cat"})]
    await runtime.turns.reply(
        Incoming(owner=ana, text="I don't have a cat, forget Miso", sent_at=clock.now())
    )
    assert chat.tool_returns[-1]["forgotten"] == ["Ana has a cat named Miso"]  # saved, and in the graph

    after = await facts.for_message(ana, "cat Miso cello", limits=STANDARD, now=clock.now())
    assert not any("Miso" in line for line in after) and any("cello" in line for line in after)
    # The edges end when the graph job follows the list, after the reply.
    assert (await run_job("graph", runtime.jobs))["ended"] == 1
    edges = await runtime.graph.search(ana, "cat Miso", limits=STANDARD_LIMITS, now=clock.now())
    assert not any("Miso" in f.text for f in edges.user)  # the edge ended too
    chat.tool_calls = [("memory_search", {"query": "cat Miso"})]
    await runtime.turns.reply(
        Incoming(owner=ana, text="what do you know about my cat?", sent_at=clock.now() + timedelta(minutes=1))
    )
    assert "Miso" not in json.dumps(chat.tool_returns[-1])
    bo_facts = await runtime.graph.search(bo, "cat Rex", limits=STANDARD_LIMITS, now=clock.now())
    assert [f.text for f in bo_facts.user] == ["Bo has a cat named Rex"]
    # Bo's edge points back to Bo's fact in the list, which is not Ana's to end.
    async with runtime.sessions() as session:
        rex = await session.scalar(select(UserFact.id).where(UserFact.content == "Bo has a cat named Rex"))
    assert bo_facts.user[0].row_ids == (rex,)
    assert await runtime.graph.end_facts(ana, [rex], clock.now()) == 0

    # Post-processing the old conversation again learns nothing it was told to forget.
    async with runtime.sessions() as session, session.begin():
        await session.execute(
            update(Conversation)
            .where(Conversation.user_id == ana, Conversation.status == "processed")
            .values(status="closed", extraction=None)
        )
    scripted.extraction = extraction_reply(user_facts=["Ana has a cat named Miso", "Ana plays the cello"])
    assert (await run_job("postprocess", runtime.jobs))["processed"] == 1
    again = await facts.for_message(ana, "cat Miso", limits=STANDARD, now=clock.now() + timedelta(hours=1))
    assert not any("Miso" in line for line in again)
    async with runtime.sessions() as session:
        held = await session.scalar(
            select(UserFact.invalidated_at).where(UserFact.content == "Ana has a cat named Miso")
        )
    assert held is not None
