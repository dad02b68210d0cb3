"""One base for the graph's decorators: every method of `KnowledgeGraph` forwarded once.

A decorator (guarded writes, background opening) derives from `GraphWrapper` and overrides only the
hook it changes, the way pydantic-ai's `WrapperToolset` forwards a toolset: `_writer` gives the graph
a write goes to, held for the write's length (a guard registers the writer there), `_keeper` the
graph /forget and /export reach (an opening graph waits for its opening there), `_reader` the graph
a search reads (never waiting).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from agent.graph.base import GraphResults, Group, GroupLimits, KnowledgeGraph, ListedFact, Vector


class GraphWrapper:
    """A `KnowledgeGraph` that forwards every call to the graph it wraps, through three hooks."""

    def __init__(self, wrapped: KnowledgeGraph) -> None:
        self.wrapped = wrapped

    async def _keeper(self) -> KnowledgeGraph:
        """The graph for /forget, /export and writes."""
        return self.wrapped

    @asynccontextmanager
    async def _writer(self, user_id: int) -> AsyncIterator[KnowledgeGraph]:
        """The graph a write of the user's goes to, held while the write runs."""
        yield await self._keeper()

    def _reader(self) -> KnowledgeGraph:
        """The graph a search reads."""
        return self.wrapped

    async def add_facts(self, user_id: int, facts: Sequence[ListedFact], group: Group = "user") -> None:
        """Forwarded through `_writer`."""
        async with self._writer(user_id) as graph:
            await graph.add_facts(user_id, facts, group)

    async def end_facts(self, user_id: int, ids: Sequence[int], at: datetime, group: Group = "user") -> int:
        """Forwarded through `_writer`."""
        async with self._writer(user_id) as graph:
            return await graph.end_facts(user_id, ids, at, group)

    async def search(
        self, user_id: int, query: str, *, limits: GroupLimits, now: datetime, vector: Vector | None = None
    ) -> GraphResults:
        """Forwarded to `_reader`."""
        return await self._reader().search(user_id, query, limits=limits, now=now, vector=vector)

    async def forget_user(self, user_id: int) -> None:
        """Forwarded to `_keeper`."""
        await (await self._keeper()).forget_user(user_id)

    async def export_user(self, user_id: int) -> dict[str, Any]:
        """Forwarded to `_keeper`."""
        return await (await self._keeper()).export_user(user_id)

    async def close(self) -> None:
        """Close the wrapped graph."""
        await self.wrapped.close()
