"""The knowledge graph as a `UserDataStore` (agent/account/forget.py), so /export and /forget include it."""

from __future__ import annotations

from typing import Any

from agent.graph.base import KnowledgeGraph


class GraphDataStore:
    """Exports and forgets a user's three graph groups."""

    name = "knowledge_graph"

    def __init__(self, graph: KnowledgeGraph) -> None:
        self.graph = graph

    async def export_user(self, user_id: int) -> Any:
        """Every episode, fact and entity of the user's groups."""
        return await self.graph.export_user(user_id)

    async def forget_user(self, user_id: int) -> None:
        """Delete every node and edge of the user's groups; a graph failure stops the /forget."""
        await self.graph.forget_user(user_id)
