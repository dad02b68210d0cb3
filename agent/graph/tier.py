"""The context builder's memory tier (tier 6) on the knowledge graph: current facts for this message."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime

from agent.context.memory import MemoryLimits
from agent.graph.errors import GraphMemoryError, GraphOpeningError
from agent.graph.memory import GraphMemory, GroupLimits, MemoryFact

logger = logging.getLogger(__name__)

# How each group reads in the prompt: the model must tell what it knows about the person from what
# happened between them and from its own (the persona's) life.
_LABELS = {"user": "", "relationship": "together: ", "persona": "your own life: "}


def fact_line(fact: MemoryFact) -> str:
    """One fact as a prompt line, with its group and the day it became true."""
    since = f" (since {fact.valid_at.date().isoformat()})" if fact.valid_at is not None else ""
    return f"{_LABELS[fact.group]}{fact.text}{since}"


class GraphMemoryTier:
    """A `MemoryTierSource` over `GraphMemory`: the three groups in parallel, current facts only.

    A graph that is slow or failing raises `GraphMemoryError`; the context builder then leaves the
    tier out and records why in the snapshot, so the reply never waits on or breaks with the graph.
    """

    def __init__(self, graph: GraphMemory, *, timeout_seconds: float) -> None:
        self.graph = graph
        self.timeout_seconds = timeout_seconds

    async def search(self, user_id: int, query: str, *, limits: MemoryLimits, now: datetime) -> Sequence[str]:
        """Lines for the memory tier: user facts first, then shared history, then the persona's."""
        group_limits = GroupLimits(user=limits.user, relationship=limits.relationship, persona=limits.persona)
        try:
            async with asyncio.timeout(self.timeout_seconds):
                results = await self.graph.search(user_id, query, limits=group_limits, now=now)
        except GraphOpeningError:
            return []  # the first seconds after a start: no graph facts yet, and nothing failed
        except TimeoutError as exc:
            raise GraphMemoryError(f"graph search timed out after {self.timeout_seconds:g} s") from exc
        # The graph filters superseded facts already; checking again keeps "current only" a property
        # of this tier whatever backend answers.
        return [fact_line(fact) for fact in results.all() if fact.is_current(now)]
