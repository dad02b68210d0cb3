"""The graph with every write guarded against /forget: see agent/account/writers.py.

The `graph` job's writes (jobs/graph.py) go through this wrapper, so an episode is written only
while the user exists, and /forget waits for an episode in flight
before it deletes the user's groups. A write for a forgotten user raises `UserForgottenError`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agent.account.writers import WriteGuard
from agent.graph.base import KnowledgeGraph
from agent.graph.wrapper import GraphWrapper


class GuardedGraph(GraphWrapper):
    """A `KnowledgeGraph` whose writes register with the `WriteGuard` and check the user first;
    reads, /forget (which waits for the writers before it calls) and /export pass straight through."""

    def __init__(self, graph: KnowledgeGraph, guard: WriteGuard) -> None:
        super().__init__(graph)
        self.guard = guard

    @asynccontextmanager
    async def _writer(self, user_id: int) -> AsyncIterator[KnowledgeGraph]:
        """The wrapped graph while the write is registered (`UserForgottenError` for a forgotten user)."""
        async with self.guard.writing(user_id), super()._writer(user_id) as graph:
            yield graph
