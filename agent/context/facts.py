"""The facts tier's seam: the facts found for this message, in the turn's note.

The builder asks a `MessageFacts` (agent/memory/service.py's `Facts` in the runtime) for the
facts relevant to the person's message, with limits chosen by how much budget is left (facts of
the list, then the graph's relation facts and the persona's own life when a graph is on), leaving
out the facts the profile already holds. Without one (`facts` is None) the tier is absent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

FactGroup = Literal["user", "relationship", "persona"]


@dataclass(frozen=True)
class FactLimits:
    """How many facts to fetch per group: user facts, shared episodes, the persona's own events."""

    user: int
    relationship: int
    persona: int
    name: str = ""

    def of(self, group: FactGroup) -> int:
        """The limit for one group."""
        limit: int = getattr(self, group)
        return limit


# Critical under 4,000 tokens of remaining budget, full over 8,000, standard between.
CRITICAL = FactLimits(user=20, relationship=10, persona=5, name="critical")
STANDARD = FactLimits(user=50, relationship=30, persona=20, name="standard")
FULL = FactLimits(user=100, relationship=50, persona=30, name="full")
CRITICAL_BELOW = 4000
FULL_ABOVE = 8000


def limits_for_budget(remaining_tokens: int) -> FactLimits:
    """The limits tier for the budget still free once history and fixed parts are counted."""
    if remaining_tokens < CRITICAL_BELOW:
        return CRITICAL
    if remaining_tokens <= FULL_ABOVE:
        return STANDARD
    return FULL


class MessageFacts(Protocol):
    """Facts relevant to a message, best first, as short lines; scoped to one user by construction."""

    async def for_message(
        self, user_id: int, query: str, *, limits: FactLimits, now: datetime, exclude: frozenset[int] = ...
    ) -> Sequence[str]:
        """Lines for the facts tier (empty when nothing is relevant), none of the facts in `exclude`
        (the ids of those the profile holds)."""
        ...


@dataclass(frozen=True)
class FunctionFacts:
    """A `MessageFacts` from a plain async function (benchmarks, tests)."""

    function: Callable[[int, str, FactLimits, datetime], Awaitable[Sequence[str]]]

    async def for_message(
        self,
        user_id: int,
        query: str,
        *,
        limits: FactLimits,
        now: datetime,
        exclude: frozenset[int] = frozenset(),
    ) -> Sequence[str]:
        """Call the function."""
        return await self.function(user_id, query, limits, now)
