"""The graph opening in the background: reads go on without it, writes wait for it, a failed opening
leaves it off, and a stop during the opening closes what it opened."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.errors import ConfigurationError, GraphOpeningError
from agent.core.settings import Settings
from agent.graph import STANDARD_LIMITS, EdgeFact, GraphError, GraphResults, NullGraph
from agent.graph.base import Group, GroupLimits, ListedFact, Vector
from agent.graph.opening import OpeningGraph
from agent.graph.setup import settings_graph_opener
from agent.memory.graph import GraphFacts
from agent.memory.service import Facts
from agent.memory.units import FactUnits
from agent.search.recall import Recall
from bench.clock import FrozenClock
from bench.fakes.hashing_embedder import HashingEmbedder

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)


class OpenedGraph:
    """The graph the opener gives: it knows one fact and records what reaches it."""

    def __init__(self) -> None:
        self.episodes: list[str] = []
        self.closed = False

    async def add_facts(self, user_id: int, facts: Sequence[ListedFact], group: Group = "user") -> None:
        """Record the facts."""
        self.episodes += [f"fact:{fact.id}" for fact in facts]

    async def end_facts(self, user_id: int, ids: Sequence[int], at: datetime, group: Group = "user") -> int:
        """Nothing to end."""
        return 0

    async def forget_user(self, user_id: int) -> None:
        """Nothing to forget."""

    async def export_user(self, user_id: int) -> dict[str, Any]:
        """Nothing to export."""
        return {}

    async def search(
        self, user_id: int, query: str, *, limits: GroupLimits, now: datetime, vector: Vector | None = None
    ) -> GraphResults:
        """One fact about the person."""
        return GraphResults(
            user=[EdgeFact(text="plays the cello", group="user", valid_at=None, invalid_at=None)]
        )

    async def close(self) -> None:
        """Record the close."""
        self.closed = True


async def test_reads_go_on_without_the_graph_while_it_opens_and_writes_wait_for_it(
    sessions: async_sessionmaker[AsyncSession], caplog: pytest.LogCaptureFixture
) -> None:
    may_open, inner = asyncio.Event(), OpenedGraph()

    async def opener() -> OpenedGraph:
        await may_open.wait()
        return inner

    graph = OpeningGraph(opener)
    graph.start()
    with pytest.raises(GraphOpeningError):
        await graph.search(1, "cello", limits=STANDARD_LIMITS, now=T0)
    # The graph adds nothing yet; the facts are the saved list, and nothing warns.
    settings = Settings(_env_file=None, embedder="none")  # type: ignore[call-arg]
    units = FactUnits.from_settings(settings)
    dialect = sessions.kw["bind"].dialect.name
    recall = Recall(settings=settings, sessions=sessions, dialect=dialect, embedder=None, units=units)
    enrichment = GraphFacts(graph, clock=FrozenClock(current=T0), timeout_seconds=1, sessions=sessions)
    facts = Facts(settings, recall, units=units, graph=enrichment)
    user, _ = await get_or_create_user(sessions, key="cli:cello", now=T0, timezone="UTC")
    added = await facts.add(user.id, "Plays the cello", conversation_id=None, at=T0)
    assert [hit.content for hit in await facts.search(user.id, "cello", limit=5, now=T0)] == [
        "Plays the cello"
    ]
    assert "WARNING" not in [r.levelname for r in caplog.records]
    writing = asyncio.create_task(graph.add_facts(1, [ListedFact(99, "I play the cello.", T0)]))
    await asyncio.sleep(0.05)
    assert not writing.done() and inner.episodes == []  # waiting for the opening, as the saved fact's
    may_open.set()
    await writing
    await enrichment.rebuild(user.id)  # the graph follows the list (the graph job, or a rebuild)
    assert sorted(inner.episodes) == sorted(["fact:99", f"fact:{added.fact_id}"]) and graph.is_open
    found = await enrichment.search(1, "cello", limits=STANDARD_LIMITS, now=T0)
    assert [f.text for f in found.all()] == ["plays the cello"]
    await graph.close()
    assert inner.closed


async def test_a_wait_for_the_opening_gives_up_without_cutting_it_short() -> None:
    may_open, inner = asyncio.Event(), OpenedGraph()

    async def opener() -> OpenedGraph:
        await may_open.wait()
        return inner

    graph = OpeningGraph(opener)
    with pytest.raises(GraphOpeningError, match=r"still opening after 0\.05 s"):
        await graph.opened(within=0.05)  # a write's caller fails as on a graph that does not answer
    may_open.set()
    assert await graph.opened() is inner
    await graph.close()


async def test_a_graph_that_fails_to_open_is_off(caplog: pytest.LogCaptureFixture) -> None:
    async def opener() -> OpenedGraph:
        raise RuntimeError("the server said no")

    graph = OpeningGraph(opener)
    caplog.set_level(logging.ERROR, logger="agent.graph.opening")
    assert isinstance(await graph.opened(), NullGraph) and not graph.is_open
    assert "knowledge graph off" in caplog.text
    with pytest.raises(GraphError, match="off"):
        await graph.search(1, "cello", limits=STANDARD_LIMITS, now=T0)
    await graph.add_facts(1, [ListedFact(1, "I play the cello.", T0)])  # nothing to write to
    await graph.close()


async def test_a_stop_during_the_opening_closes_what_it_opened() -> None:
    started, may_open, inner = asyncio.Event(), asyncio.Event(), OpenedGraph()

    async def opener() -> OpenedGraph:
        started.set()
        await may_open.wait()
        return inner

    graph = OpeningGraph(opener)
    graph.start()
    await started.wait()
    closing = asyncio.create_task(graph.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # the stop waits for the opening: a server it starts must not outlive us
    may_open.set()
    await closing
    assert inner.closed
    await OpeningGraph(opener).close()  # never started: nothing to do


def test_what_cannot_work_stops_the_start_before_anything_opens() -> None:
    clock, key = FrozenClock(current=T0), SecretStr("sk-test")

    def decide(**values: object) -> object:
        chosen = Settings(_env_file=None, anthropic_api_key=key, **values)  # type: ignore[arg-type]
        return settings_graph_opener(chosen, embedder=HashingEmbedder(), clock=clock)

    with pytest.raises(ConfigurationError, match="GRAPH_URL is required"):
        decide(graph_backend="falkordb")
    with pytest.raises(ConfigurationError, match="falkor://host:port, not bolt://"):
        decide(graph_backend="falkordb", graph_url="bolt://localhost:7687")
    assert decide(graph_backend="none") is None
    assert callable(decide(graph_backend="falkordb", graph_url="falkor://localhost:6379"))
