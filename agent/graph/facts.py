"""`memory_search` / `memory_add` on the knowledge graph (a `FactStore` of agent/search/facts.py).

Used when GRAPH_BACKEND is not `none`. `add` stores the fact in `user_facts` too: that row gives the
tool its id and deduplication, keeps /memory and /export complete, and is what search falls back
to when the graph fails (or if the graph is later switched off).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import Clock
from agent.core.errors import UserForgottenError
from agent.core.usage import UsageMeter, metering, store_usage_apart
from agent.graph.errors import GraphMemoryError, GraphOpeningError
from agent.graph.memory import GraphMemory, GroupLimits, MemoryFact
from agent.search.facts import FactAdded, FactHit, FactStore

logger = logging.getLogger(__name__)


def _hit(rank: int, fact: MemoryFact) -> FactHit:
    # Graph facts have no row id (0) and no absolute score: the score is 1 / rank of graphiti's RRF.
    since = fact.valid_at.isoformat(timespec="minutes") if fact.valid_at is not None else ""
    return FactHit(0, fact.text, f"graph:{fact.group}", since, round(1.0 / rank, 3))


class GraphFactStore:
    """Facts from the user and relationship groups of the graph; new facts go to the graph and the DB."""

    def __init__(
        self,
        graph: GraphMemory,
        fallback: FactStore,
        *,
        clock: Clock,
        search_timeout_seconds: float = 2.0,
        sessions: async_sessionmaker[AsyncSession] | None = None,
    ) -> None:
        self.graph = graph
        # Where the background graph write's model usage is stored (the turn's is already committed).
        self.sessions = sessions
        self.fallback = fallback
        self.clock = clock
        self.search_timeout_seconds = search_timeout_seconds
        # Writes in flight: graphiti's extraction takes several model calls, which the reply must
        # not wait for; the references keep the tasks alive until they finish.
        self._pending: set[asyncio.Task[None]] = set()

    async def search(self, user_id: int, query: str, *, limit: int) -> list[FactHit]:
        """Current facts about the user (then shared history) matching the query; the newest when empty."""
        # The persona's own life is not a fact about the person: that group stays in the context tier.
        limits = GroupLimits(user=limit, relationship=max(1, limit // 2), persona=0)
        try:
            # A graph that is down retries its connection for seconds: the saved facts answer sooner.
            async with asyncio.timeout(self.search_timeout_seconds):
                results = await self.graph.search(user_id, query, limits=limits, now=self.clock.now())
        except GraphOpeningError:
            return await self.fallback.search(user_id, query, limit=limit)  # the first seconds after a start
        except (GraphMemoryError, TimeoutError) as exc:
            logger.warning("graph fact search failed, using saved facts", extra={"error": repr(exc)[:200]})
            return await self.fallback.search(user_id, query, limit=limit)
        facts = [*results.user, *results.relationship][:limit]
        return [_hit(rank, fact) for rank, fact in enumerate(facts, start=1)]

    async def add(
        self,
        user_id: int,
        content: str,
        *,
        conversation_id: int | None,
        at: datetime,
        source: str = "tool",
        category: str | None = None,
    ) -> FactAdded:
        """Save the fact (deduplicated) and, when new, add it to the graph in the background."""
        added = await self.fallback.add(
            user_id, content, conversation_id=conversation_id, at=at, source=source, category=category
        )
        if not added.created:
            return added
        task = asyncio.create_task(self._add_to_graph(user_id, added.content, at))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return added

    async def _add_to_graph(self, user_id: int, content: str, at: datetime) -> None:
        meter = UsageMeter()
        try:
            with metering(meter):
                await self.graph.add_fact(user_id, content, at)
        except UserForgottenError:
            logger.info("graph fact dropped: user forgotten", extra={"user_id": user_id})
        except GraphMemoryError as exc:
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
        """Wait for graph writes in flight (shutdown, tests)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
            await asyncio.sleep(0)  # let the done callbacks empty the set (see TurnService.settle)
