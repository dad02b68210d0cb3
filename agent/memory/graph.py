"""The knowledge graph as a view of the one list of facts, never a second list.

With GRAPH_BACKEND set, the graph is searched beside the list, and what it finds in the user group
counts through the list's facts its edges point back to (agent/graph/view.py): a held fact the
list's own ranking missed joins the facts found for a message and those `memory_search` finds,
with the list's words; an edge whose facts the person took back or hid shows nothing. A fact saved
goes to the list first and to the graph in the background; taking a fact back ends the edges that
stand on it alone; `rebuild` writes a person's graph again from the list. A graph that is slow or
failing is skipped: the list answers alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import Clock, ensure_utc
from agent.core.errors import GraphError, UserForgottenError
from agent.core.usage import UsageMeter, metering, store_usage_apart
from agent.graph.base import EdgeFact, GraphResults, GroupLimits, KnowledgeGraph, ListedFact, Vector
from agent.memory.units import Known, KnownFact
from agent.search.embeddings import Embedder
from db.models import UserFact
from db.repositories.facts import FactRepository

logger = logging.getLogger(__name__)

# How each group reads in the prompt: the model must tell what it knows about the person from what
# happened between them and from its own (the persona's) life.
_LABELS = {"user": "", "relationship": "together: ", "persona": "your own life: "}


def fact_line(fact: EdgeFact) -> str:
    """One graph fact as a prompt line, with its group and the day it became true."""
    since = f" (since {fact.valid_at.date().isoformat()})" if fact.valid_at is not None else ""
    return f"{_LABELS[fact.group]}{fact.text}{since}"


def listed(fact: UserFact) -> ListedFact:
    """A row of the list as the graph takes it."""
    messages = tuple(int(m) for m in fact.message_ids or ())
    return ListedFact(fact.id, fact.content, ensure_utc(fact.created_at), messages)


def through_list(
    found: Iterable[EdgeFact], known: Known, keep: Callable[[KnownFact], bool]
) -> tuple[list[KnownFact], list[EdgeFact]]:
    """What the graph found, read through the list: the held facts its user-group edges point back
    to (in the graph's order, each once, those `keep` takes), and the other groups' facts."""
    by_id = {fact.id: fact for fact in known.facts}
    listed_facts: dict[int, KnownFact] = {}
    others: list[EdgeFact] = []
    for edge in found:
        if edge.group != "user":
            others.append(edge)
            continue
        for fact_id in edge.fact_ids:
            fact = by_id.get(fact_id)
            if fact is not None and keep(fact):
                listed_facts.setdefault(fact_id, fact)
    return list(listed_facts.values()), others


class GraphFacts:
    """The graph's side of the one list: its relation facts for a query, and the writes that follow
    the list (a saved fact added, a taken-back fact's edges ended)."""

    def __init__(
        self,
        graph: KnowledgeGraph,
        *,
        clock: Clock,
        timeout_seconds: float,
        sessions: async_sessionmaker[AsyncSession] | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.graph = graph
        # The embedder the graph was opened with, when known: a query embedded by it is not
        # embedded again by the graph.
        self.embedder = embedder
        self.clock = clock
        self.timeout_seconds = timeout_seconds
        # Where the background graph write's model usage is stored (the turn's is already committed).
        self.sessions = sessions
        # Writes in flight: graphiti's extraction takes several model calls, which the reply must
        # not wait for; the references keep the tasks alive until they finish.
        self._pending: set[asyncio.Task[None]] = set()

    async def search(
        self, user_id: int, query: str, *, limits: GroupLimits, now: datetime, vector: Vector | None = None
    ) -> GraphResults:
        """The groups' current facts for the query, in parallel; `GraphError` when the graph
        fails or takes longer than the timeout. `vector`: the query embedded by `embedder`."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                results = await self.graph.search(user_id, query, limits=limits, now=now, vector=vector)
        except TimeoutError as exc:
            raise GraphError(f"graph search timed out after {self.timeout_seconds:g} s") from exc
        # The graph filters superseded facts already; checking again keeps "current only" a property
        # of this enrichment whatever backend answers.
        return GraphResults(
            user=[f for f in results.user if f.is_current(now)],
            relationship=[f for f in results.relationship if f.is_current(now)],
            persona=[f for f in results.persona if f.is_current(now)],
        )

    def end(self, user_id: int, fact_ids: Sequence[int], at: datetime) -> None:
        """The list took these facts back at `at`: end the edges standing on them alone, in the
        background (the reply never waits for a graph still opening or slow; reads already count
        through the list, so the edges show nothing meanwhile)."""
        if fact_ids:
            self._later(self._end(user_id, list(fact_ids), at))

    def add(self, user_id: int, fact: ListedFact) -> None:
        """Add a newly saved fact to the graph in the background (the list already holds it)."""
        self._later(self._add(user_id, fact))

    def _later(self, write: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(write)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def rebuild(self, user_id: int) -> int:
        """The person's graph written again from the list: their groups cleared, every held fact
        added (each pointing back to it and its messages); how many facts. Needs `sessions`."""
        assert self.sessions is not None, "rebuilding reads the list"
        async with self.sessions() as session:
            facts = [listed(f) for f in await FactRepository(session).held(user_id)]
        await self.drain()
        await self.graph.forget_user(user_id)
        await self.graph.add_facts(user_id, facts)
        logger.info("graph rebuilt from the list", extra={"user_id": user_id, "facts": len(facts)})
        return len(facts)

    async def _end(self, user_id: int, fact_ids: list[int], at: datetime) -> None:
        try:
            await self.graph.end_facts(user_id, fact_ids, at)
        except (GraphError, UserForgottenError) as exc:
            # The list holds the change; a rebuild brings the edges in line.
            logger.warning("graph edges not ended", extra={"user_id": user_id, "error": str(exc)[:200]})

    async def _add(self, user_id: int, fact: ListedFact) -> None:
        meter = UsageMeter()
        try:
            with metering(meter):
                await self.graph.add_facts(user_id, [fact])
        except UserForgottenError:
            logger.info("graph fact dropped: user forgotten", extra={"user_id": user_id})
        except GraphError as exc:
            # The row is saved: the fact is not lost, only missing from the graph's own search.
            logger.warning("graph fact not added", extra={"user_id": user_id, "error": str(exc)[:200]})
        if self.sessions is None:
            return
        try:
            await store_usage_apart(self.sessions, user_id, fact.at.astimezone(UTC).date(), meter)
        except SQLAlchemyError as exc:
            # Only the count is lost; the fact is saved and in the graph.
            logger.warning("graph usage not stored", extra={"user_id": user_id, "error": repr(exc)[:200]})

    async def drain(self) -> None:
        """Wait for graph writes in flight (shutdown, /forget, tests)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
            await asyncio.sleep(0)  # let the done callbacks empty the set (see TurnService.settle)
