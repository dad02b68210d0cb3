"""The graph switched off (`GRAPH_BACKEND=none`): every call succeeds and remembers nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agent.graph.base import GROUPS, GraphResults, Group, GroupLimits, ListedFact, Vector


class NullGraph:
    """A `KnowledgeGraph` that stores nothing, so the rest of the bot runs unchanged without a graph."""

    async def add_facts(self, user_id: int, facts: Sequence[ListedFact], group: Group = "user") -> None:
        """Do nothing."""

    async def end_facts(self, user_id: int, ids: Sequence[int], at: datetime, group: Group = "user") -> int:
        """Nothing to end."""
        return 0

    async def search(
        self, user_id: int, query: str, *, limits: GroupLimits, now: datetime, vector: Vector | None = None
    ) -> GraphResults:
        """Return no facts."""
        return GraphResults()

    async def forget_user(self, user_id: int) -> None:
        """Do nothing: nothing is stored."""

    async def export_user(self, user_id: int) -> dict[str, Any]:
        """Return empty groups."""
        return {"backend": "none", "groups": {group: {"episodes": [], "facts": []} for group in GROUPS}}

    async def close(self) -> None:
        """Do nothing."""
