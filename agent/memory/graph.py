"""The knowledge graph as an enrichment of the one list of facts, never a second list.

With GRAPH_BACKEND set, the graph's relation facts (what it knows about the person, the history
the two share, the persona's own life) join the facts recalled for a message and those
`memory_search` finds, deduplicated against the list: a graph fact that says what a held fact says
is left out, and so is one that says what the person took back. A fact saved by a tool goes to
the list first and to the graph in the background; taking a fact back ends the edges that say it.
A graph that is slow or failing is skipped: the list answers alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import Clock
from agent.core.errors import GraphError, GraphOpeningError, UserForgottenError
from agent.core.usage import UsageMeter, metering, store_usage_apart
from agent.graph.base import EdgeFact, GraphResults, GroupLimits, KnowledgeGraph
from agent.memory.words import Postings
from agent.search.embeddings import Embedder

logger = logging.getLogger(__name__)

# How each group reads in the prompt: the model must tell what it knows about the person from what
# happened between them and from its own (the persona's) life.
_LABELS = {"user": "", "relationship": "together: ", "persona": "your own life: "}


def fact_line(fact: EdgeFact) -> str:
    """One graph fact as a prompt line, with its group and the day it became true."""
    since = f" (since {fact.valid_at.date().isoformat()})" if fact.valid_at is not None else ""
    return f"{_LABELS[fact.group]}{fact.text}{since}"


def joined(found: Iterable[EdgeFact], held: Postings, taken_back: Postings) -> list[EdgeFact]:
    """The graph's facts that add to the list: not said by a held fact, not taken back, each once."""
    out: list[EdgeFact] = []
    for fact in found:
        if held.says(fact.text) or taken_back.says(fact.text):
            continue
        if Postings([f.text for f in out], held.language).says(fact.text):
            continue
        out.append(fact)
    return out


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
        self,
        user_id: int,
        query: str,
        *,
        limits: GroupLimits,
        now: datetime,
        query_vector: Sequence[float] | None = None,
    ) -> GraphResults:
        """The groups' current facts for the query, in parallel; `GraphError` when the graph
        fails or takes longer than the timeout. `query_vector`: the query embedded by `embedder`."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                results = await self.graph.search(
                    user_id, query, limits=limits, now=now, query_vector=query_vector
                )
        except TimeoutError as exc:
            raise GraphError(f"graph search timed out after {self.timeout_seconds:g} s") from exc
        # The graph filters superseded facts already; checking again keeps "current only" a property
        # of this enrichment whatever backend answers.
        return GraphResults(
            user=[f for f in results.user if f.is_current(now)],
            relationship=[f for f in results.relationship if f.is_current(now)],
            persona=[f for f in results.persona if f.is_current(now)],
        )

    async def edges_saying(self, user_id: int, sentence: str, *, now: datetime) -> list[EdgeFact]:
        """The person's graph facts (with uuids) that a sentence names; none when the graph fails."""
        try:
            found = await self.search(
                user_id, sentence, limits=GroupLimits(user=10, relationship=5, persona=0), now=now
            )
        except GraphOpeningError:
            # Still opening after a start: the saved facts are taken back now; an edge saying the same
            # stays in the graph until a later correction names it.
            return []
        except GraphError as exc:
            logger.warning(
                "graph search for facts to take back failed", extra={"user_id": user_id}, exc_info=exc
            )
            return []
        return [f for f in found.all() if f.uuid]

    async def end(self, user_id: int, uuids: Sequence[str], at: datetime) -> int:
        """End these edges of the person at `at`; how many were ended."""
        return await self.graph.invalidate_facts(user_id, uuids, at) if uuids else 0

    def add(self, user_id: int, content: str, at: datetime) -> None:
        """Add a newly saved fact to the graph in the background (the list already holds it)."""
        task = asyncio.create_task(self._add(user_id, content, at))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _add(self, user_id: int, content: str, at: datetime) -> None:
        meter = UsageMeter()
        try:
            with metering(meter):
                await self.graph.add_fact(user_id, content, at)
        except UserForgottenError:
            logger.info("graph fact dropped: user forgotten", extra={"user_id": user_id})
        except GraphError as exc:
            # The row is saved: the fact is not lost, only missing from the graph's own search.
            logger.warning("graph fact not added", extra={"user_id": user_id, "error": str(exc)[:200]})
        if self.sessions is None:
            return
        try:
            await store_usage_apart(self.sessions, user_id, at.astimezone(UTC).date(), meter)
        except SQLAlchemyError as exc:
            # Only the count is lost; the fact is saved and in the graph.
            logger.warning("graph usage not stored", extra={"user_id": user_id, "error": repr(exc)[:200]})

    async def drain(self) -> None:
        """Wait for graph writes in flight (shutdown, /forget, tests)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
            await asyncio.sleep(0)  # let the done callbacks empty the set (see TurnService.settle)
