"""The graph with every write guarded against /forget: see agent/account/writers.py.

Post-processing's graph stage and `memory_add`'s background write both go through this wrapper, so
an episode is written only while the user exists, and /forget waits for an episode in flight
before it deletes the user's groups. A write for a forgotten user raises `UserForgottenError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agent.account.writers import WriteGuard
from agent.graph.base import GraphResults, Group, GroupLimits, KnowledgeGraph


class GuardedGraph:
    """A `KnowledgeGraph` whose writes register with the `WriteGuard` and check the user first."""

    def __init__(self, graph: KnowledgeGraph, guard: WriteGuard) -> None:
        self.graph = graph
        self.guard = guard

    async def add_episode(
        self,
        user_id: int,
        group: Group,
        name: str,
        body: str,
        reference_time: datetime,
        source_id: str,
        *,
        facts: Sequence[str] | None = None,
    ) -> None:
        """Add the episode unless the user was forgotten (then `UserForgottenError`)."""
        async with self.guard.writing(user_id):
            await self.graph.add_episode(user_id, group, name, body, reference_time, source_id, facts=facts)

    async def add_fact(self, user_id: int, text: str, reference_time: datetime) -> None:
        """Add the fact unless the user was forgotten (then `UserForgottenError`)."""
        async with self.guard.writing(user_id):
            await self.graph.add_fact(user_id, text, reference_time)

    async def invalidate_facts(self, user_id: int, uuids: Sequence[str], at: datetime) -> int:
        """End the facts unless the user was forgotten (then `UserForgottenError`)."""
        async with self.guard.writing(user_id):
            return await self.graph.invalidate_facts(user_id, uuids, at)

    async def search(
        self,
        user_id: int,
        query: str,
        *,
        limits: GroupLimits,
        now: datetime,
        query_vector: Sequence[float] | None = None,
    ) -> GraphResults:
        """Reads need no guard."""
        return await self.graph.search(user_id, query, limits=limits, now=now, query_vector=query_vector)

    async def forget_user(self, user_id: int) -> None:
        """Delete the user's groups (forget waits for the writers before it calls this)."""
        await self.graph.forget_user(user_id)

    async def export_user(self, user_id: int) -> dict[str, Any]:
        """Everything stored about the user."""
        return await self.graph.export_user(user_id)

    async def close(self) -> None:
        """Close the wrapped graph."""
        await self.graph.close()
