"""The graph wired into the bot as a view of the one list: post-processing writes the list's facts
into it, each edge pointing back to its fact and messages, what it finds counts through the list in
what is recalled for a message and what the tools find, /forget removes it, and it is rebuilt from
the list. Real embedded FalkorDB, graphiti's LLM scripted, the chat model a FunctionModel."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.forget import export_user, forget_user
from agent.account.users import get_or_create_user
from agent.context.facts import STANDARD
from agent.core.settings import Settings
from agent.graph import GROUPS, STANDARD_LIMITS, ListedFact, NullGraph, group_id, open_graph
from agent.graph.graphiti_backend import GraphitiGraph
from agent.graph.guarded import GuardedGraph
from agent.history.turn_notes import turn_note
from agent.reports.texts import memory_report
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedLLMClient
from bench.fakes.hashing_embedder import HashingEmbedder
from bot.runtime import Runtime, build_runtime
from db.repositories.facts import FactRepository
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, extraction_reply, seed_conversation

from .conftest import HAVE_FALKORDBLITE, IN_CI
from .test_graphiti_backend import contradict_where_one_lives

TEXTS = ["I live in Lisbon and play the cello", "Lovely!", "My concert is on Friday", "Good luck"]


@dataclass
class Chat:
    """The chat model: records what it was sent; calls the tools it is told to, then answers."""

    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)
    tool_returns: list[Any] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        )
        if returns:
            self.tool_returns.extend(p.content for p in returns)
            return ModelResponse(parts=[TextPart("noted")])
        # The context the model reads: the instructions and this turn's note.
        self.instructions.append(f"{info.instructions or ''}\n\n{turn_note(last)}")
        if self.tool_calls:
            name, args = self.tool_calls.pop(0)
            return ModelResponse(parts=[ToolCallPart(name, args)])
        return ModelResponse(parts=[TextPart("hello")])


OpenRuntime = Callable[..., Awaitable[Runtime]]


@pytest.fixture
async def open_runtime(
    database_url: str, engine: AsyncEngine, clock: FrozenClock, tmp_path: Path
) -> AsyncIterator[OpenRuntime]:
    """A runtime whose graph is a real GraphitiGraph on falkordblite with the scripted LLM."""
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")
    opened: list[Runtime] = []

    async def _open(chat: Chat, scripted: ScriptedSummaries, llm: ScriptedLLMClient | None = None) -> Runtime:
        graph = await open_graph(
            "falkordblite",
            url=None,
            path=str(tmp_path / "graph.db"),
            llm_client=llm or ScriptedLLMClient(),
            embedder=HashingEmbedder(),
            clock=clock,
        )
        settings = Settings(
            _env_file=None, database_url=database_url, model="test", summary_model="test", embedder="none"
        )
        runtime = await build_runtime(
            settings,
            clock=clock,
            model=FunctionModel(chat),
            summary_model=FunctionModel(scripted),
            migrate=False,
            embedder=None,
            graph=graph,
        )
        opened.append(runtime)
        return runtime

    yield _open
    for runtime in opened:
        await runtime.close()


async def postprocessed_user(
    runtime: Runtime, scripted: ScriptedSummaries, clock: FrozenClock, key: str, facts: list[str]
) -> int:
    """A user with one closed conversation whose facts post-processing learned and the graph job
    wrote into the graph: an episode per fact of the list, one for the persona's thought, and none
    of the shared history (the day is not final yet)."""
    scripted.extraction = extraction_reply(user_facts=facts)
    user_id, _ = await seed_conversation(runtime.sessions, start=clock.now(), texts=TEXTS, user_key=key)
    counts = await run_job("postprocess", runtime.jobs)
    assert (counts["processed"], counts["failed"]) == (1, 0)
    assert (await run_job("graph", runtime.jobs))["written"] == len(facts) + 1
    written = (await runtime.graph.export_user(user_id))["groups"]
    assert len(written["user"]["episodes"]) == len(facts)
    assert (len(written["relationship"]["episodes"]), len(written["persona"]["episodes"])) == (0, 1)
    return user_id


@pytest.mark.process
async def test_post_processed_episodes_reach_the_model_through_the_memory_tier(
    open_runtime: OpenRuntime, clock: FrozenClock
) -> None:
    chat, scripted = Chat(), ScriptedSummaries()
    runtime = await open_runtime(chat, scripted)
    # The graph stage writes through the /forget guard.
    assert isinstance(runtime.jobs.graph, GuardedGraph) and runtime.jobs.graph.wrapped is runtime.graph
    assert [s.name for s in runtime.data_stores][-1] == "knowledge_graph"
    user_id = await postprocessed_user(runtime, scripted, clock, "cli:ana", ["Ana lives in Lisbon"])

    # The edge points back to the list's fact, whose episode names the messages it stands on.
    async with runtime.sessions() as session:
        (fact,) = await FactRepository(session).held(user_id)
    found = await runtime.graph.search(user_id, "Lisbon", limits=STANDARD_LIMITS, now=clock.now())
    assert [(f.text, f.row_ids) for f in found.user] == [("Ana lives in Lisbon", (fact.id,))]
    (episode,) = (await runtime.graph.export_user(user_id))["groups"]["user"]["episodes"]
    messages = ",".join(str(m) for m in fact.message_ids)
    assert (episode["name"], episode["content"]) == (f"fact:{fact.id} messages:{messages}", fact.content)

    clock.advance(timedelta(days=2))
    await runtime.turns.reply(
        Incoming(owner=user_id, text="Remember my concert? And that I live in Lisbon?", sent_at=clock.now())
    )

    # The fact is in the profile, read from the one list; what the graph found is that same fact.
    about, _, note = chat.instructions[0].partition("What you remember:")
    assert "- Ana lives in Lisbon" in about.split("<about_them>", 1)[1].split("</about_them>", 1)[0]
    assert "Lisbon" not in note
    assert "together:" not in note  # the summary stays in the day summaries, not in the graph
    report = await memory_report(runtime.sessions, user_id, clock.now())
    assert "- Ana lives in Lisbon" in report


@pytest.mark.process
async def test_the_graph_is_rebuilt_from_the_list(open_runtime: OpenRuntime, clock: FrozenClock) -> None:
    chat, scripted = Chat(), ScriptedSummaries()
    runtime = await open_runtime(chat, scripted)
    user_id = await postprocessed_user(
        runtime, scripted, clock, "cli:ana", ["Ana lives in Lisbon", "Ana plays the cello"]
    )
    facts = runtime.facts
    assert facts is not None and facts.graph is not None
    graph = runtime.graph
    assert isinstance(graph, GraphitiGraph)
    # What no row holds: a fact of no row, and a copy of a conversation's summary.
    await graph.add_facts(user_id, [ListedFact(9999, "Ana has a dog", clock.now())])
    await graph.add_episode(user_id, "relationship", "c", "-", clock.now(), "c:1", facts=["We joked"])

    assert await facts.graph.rebuild(user_id) == 3  # the two facts and the persona's thought
    exported = (await graph.export_user(user_id))["groups"]
    assert sorted(e["content"] for e in exported["user"]["episodes"]) == [
        "Ana lives in Lisbon",
        "Ana plays the cello",
    ]
    assert sorted(f["fact"] for f in exported["user"]["facts"]) == [
        "Ana lives in Lisbon",
        "Ana plays the cello",
    ]
    assert exported["relationship"]["facts"] == []
    assert [e["content"] for e in exported["persona"]["episodes"]] == ["I wonder how the rehearsal went"]


@pytest.mark.process
async def test_a_later_fact_replaces_an_earlier_one_in_the_memory_tier(
    open_runtime: OpenRuntime, clock: FrozenClock
) -> None:
    chat, scripted = Chat(), ScriptedSummaries()
    runtime = await open_runtime(
        chat, scripted, ScriptedLLMClient({"EdgeDuplicate": contradict_where_one_lives})
    )
    user_id = await postprocessed_user(runtime, scripted, clock, "cli:ana", ["I live in Paris."])
    clock.advance(timedelta(weeks=5))
    # Weeks later, another conversation: the move.
    scripted.extraction = extraction_reply(user_facts=["I moved to Berlin."])
    await seed_conversation(runtime.sessions, start=clock.now(), texts=TEXTS, user_key="cli:ana")
    await run_job("postprocess", runtime.jobs)
    await run_job("graph", runtime.jobs)
    clock.advance(timedelta(days=1))

    found = await runtime.graph.search(
        user_id, "where do I live, Paris or Berlin?", limits=STANDARD_LIMITS, now=clock.now()
    )
    await runtime.turns.reply(
        Incoming(owner=user_id, text="where do I live, Paris or Berlin?", sent_at=clock.now())
    )

    # The graph ended the earlier edge: what it adds to recall never brings Paris back.
    assert any("I moved to Berlin" in f.text for f in found.user)
    assert not any("Paris" in f.text for f in found.all())
    note = chat.instructions[0].partition("What you remember:")[2]
    assert "Paris" not in note
    # The list holds both until consolidation supersedes the earlier one (jobs/consolidate):
    # the profile reads the list, never the graph's version of it.
    assert "I moved to Berlin" in chat.instructions[0]


@pytest.mark.process
async def test_users_never_see_each_others_graph_through_the_tier_or_the_tools(
    open_runtime: OpenRuntime, clock: FrozenClock
) -> None:
    chat, scripted = Chat(), ScriptedSummaries()
    runtime = await open_runtime(chat, scripted)
    ana = await postprocessed_user(runtime, scripted, clock, "cli:ana", ["Ana lives in Lisbon"])
    bo = await postprocessed_user(runtime, scripted, clock, "cli:bo", ["Bo lives in Oslo"])
    clock.advance(timedelta(days=1))

    # memory_add reaches the graph through the graph job, for the user of the turn only.
    chat.tool_calls = [("memory_add", {"fact": "Has a cat named Miso"})]
    await runtime.turns.reply(
        Incoming(owner=ana, text="Please remember that I have a cat named Miso", sent_at=clock.now())
    )
    assert chat.tool_returns[-1]["saved"] is True
    assert (await run_job("graph", runtime.jobs))["written"] == 1  # the graph follows the list
    found = await runtime.graph.search(ana, "cat Miso", limits=STANDARD_LIMITS, now=clock.now())
    assert "Has a cat named Miso" in [f.text for f in found.user]
    assert found.user[0].valid_at == clock.now()

    clock.advance(timedelta(minutes=1))
    chat.tool_calls = [("memory_search", {"query": "Miso Lisbon Oslo cat"})]
    await runtime.turns.reply(
        Incoming(owner=bo, text="What do you know about Miso, Lisbon or Oslo?", sent_at=clock.now())
    )
    bo_facts = json.dumps(chat.tool_returns[-1])
    assert "Bo lives in Oslo" in bo_facts
    assert "Miso" not in bo_facts and "Lisbon" not in bo_facts

    facts = runtime.facts
    assert facts is not None
    ana_lines = await facts.for_message(ana, "Miso Lisbon Oslo", limits=STANDARD, now=clock.now())
    bo_lines = await facts.for_message(bo, "Miso Lisbon Oslo", limits=STANDARD, now=clock.now())
    assert any("Miso" in line for line in ana_lines) and any("Lisbon" in line for line in ana_lines)
    assert not any("Oslo" in line for line in ana_lines)
    assert not any("Miso" in line or "Lisbon" in line for line in bo_lines)
    assert "Oslo" in chat.instructions[-1] and "Lisbon" not in chat.instructions[-1]


@pytest.mark.process
async def test_forget_through_the_runtime_leaves_no_node_or_edge_of_that_user(
    open_runtime: OpenRuntime, clock: FrozenClock
) -> None:
    chat, scripted = Chat(), ScriptedSummaries()
    runtime = await open_runtime(chat, scripted)
    ana = await postprocessed_user(runtime, scripted, clock, "cli:ana", ["Ana lives in Lisbon"])
    bo = await postprocessed_user(runtime, scripted, clock, "cli:bo", ["Bo lives in Oslo"])
    clock.advance(timedelta(days=1))
    chat.tool_calls = [("memory_add", {"fact": "Has a cat named Miso"})]
    await runtime.turns.reply(Incoming(owner=ana, text="Remember my cat Miso", sent_at=clock.now()))
    await run_job("graph", runtime.jobs)
    exported = await export_user(runtime.sessions, ana, runtime.data_stores)
    assert exported["knowledge_graph"]["groups"]["user"]["facts"]

    await forget_user(runtime.sessions, ana, runtime.data_stores)

    graph = runtime.graph
    assert isinstance(graph, GraphitiGraph)
    names = await graph.connection.graph_names()
    gone = [group_id(ana, g) for g in GROUPS]
    assert not set(gone) & set(names)
    assert group_id(bo, "user") in names
    falkor = graph.connection.driver.client  # type: ignore[attr-defined]
    for name in names:
        nodes = await falkor.select_graph(name).query(
            "MATCH (n) WHERE n.group_id IN $gids RETURN count(n)", {"gids": gone}
        )
        edges = await falkor.select_graph(name).query(
            "MATCH ()-[r]->() WHERE r.group_id IN $gids RETURN count(r)", {"gids": gone}
        )
        assert nodes.result_set[0][0] == 0 and edges.result_set[0][0] == 0
    assert len(await graph.search(ana, "Lisbon Miso cat", limits=STANDARD_LIMITS, now=clock.now())) == 0
    assert len(await graph.search(bo, "Oslo", limits=STANDARD_LIMITS, now=clock.now())) >= 1


async def test_graph_off_leaves_the_list_as_the_facts_found(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        model="test",
        summary_model="test",
        embedder="none",
        graph_backend="none",
    )
    chat = Chat(tool_calls=[("memory_add", {"fact": "Has a cat named Miso"})])
    runtime = await build_runtime(
        settings, clock=clock, model=FunctionModel(chat), migrate=False, embedder=None
    )
    try:
        user, _ = await get_or_create_user(
            sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="Ana"
        )
        await runtime.turns.reply(Incoming(owner=user.id, text="Remember my cat Miso", sent_at=clock.now()))
        assert isinstance(runtime.graph, NullGraph) and runtime.jobs.graph is None
        assert [s.name for s in runtime.data_stores] == ["search_index"]
        assert runtime.facts is not None and runtime.facts.graph is None
        assert runtime.turns.context_builder.facts is runtime.facts
        assert chat.tool_returns[-1]["saved"] is True
        assert "Has a cat named Miso" in await memory_report(runtime.sessions, user.id, clock.now())
    finally:
        await runtime.close()
