"""The memory tier's seam: what the knowledge graph must offer the context builder.

The builder asks a `MemoryTierSource` for facts relevant to the user's message, with per-group
limits chosen by how much budget is left. Without a graph (GRAPH_BACKEND=none) the tier is
simply absent (`memory` is None in the builder). `GraphMemory.search(user_id, query, limits=...,
now=...)` returns facts per group; `graph_tier` adapts anything of that shape to this protocol.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

MemoryGroup = Literal["user", "relationship", "persona"]


@dataclass(frozen=True)
class MemoryLimits:
    """How many facts to fetch per group: user facts, shared episodes, the persona's own events."""

    user: int
    relationship: int
    persona: int
    name: str = ""

    def of(self, group: MemoryGroup) -> int:
        """The limit for one group."""
        limit: int = getattr(self, group)
        return limit


# Critical under 4,000 tokens of remaining budget, full over 8,000, standard between.
CRITICAL = MemoryLimits(user=20, relationship=10, persona=5, name="critical")
STANDARD = MemoryLimits(user=50, relationship=30, persona=20, name="standard")
FULL = MemoryLimits(user=100, relationship=50, persona=30, name="full")
CRITICAL_BELOW = 4000
FULL_ABOVE = 8000


def limits_for_budget(remaining_tokens: int) -> MemoryLimits:
    """The limits tier for the budget still free once history and fixed parts are counted."""
    if remaining_tokens < CRITICAL_BELOW:
        return CRITICAL
    if remaining_tokens <= FULL_ABOVE:
        return STANDARD
    return FULL


class MemoryTierSource(Protocol):
    """Facts relevant to a message, best first, as short lines; scoped to one user by construction."""

    async def search(self, user_id: int, query: str, *, limits: MemoryLimits, now: datetime) -> Sequence[str]:
        """Lines for the memory tier (empty when nothing is relevant)."""
        ...


@dataclass(frozen=True)
class FunctionMemory:
    """A `MemoryTierSource` from a plain async function (adapters, tests, the graph's wiring)."""

    function: Callable[[int, str, MemoryLimits, datetime], Awaitable[Sequence[str]]]

    async def search(self, user_id: int, query: str, *, limits: MemoryLimits, now: datetime) -> Sequence[str]:
        """Call the function."""
        return await self.function(user_id, query, limits, now)
