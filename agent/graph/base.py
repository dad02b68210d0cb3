"""Our interface to the knowledge graph: three groups per user, temporal facts, removable per user."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, get_args

Group = Literal["user", "relationship", "persona"]
# A query embedded by the graph's own embedder.
Vector = Sequence[float]
GROUPS: tuple[Group, ...] = get_args(Group)


def group_id(user_id: int, group: Group) -> str:
    """The graph partition of one user's group, e.g. `u42_user`.

    graphiti allows [A-Za-z0-9_-], but a dash breaks its FalkorDB fulltext group filter (RediSearch
    splits `u42-user` into two tokens, so BM25 finds nothing): underscores only.
    """
    return f"u{user_id}_{group}"


@dataclass(frozen=True)
class GroupLimits:
    """How many facts to fetch from each group."""

    user: int
    relationship: int
    persona: int

    def of(self, group: Group) -> int:
        """The limit for one group."""
        limit: int = getattr(self, group)
        return limit


CRITICAL_LIMITS = GroupLimits(user=20, relationship=10, persona=5)
STANDARD_LIMITS = GroupLimits(user=50, relationship=30, persona=20)
FULL_LIMITS = GroupLimits(user=100, relationship=50, persona=30)


def limits_for_budget(remaining_tokens: int) -> GroupLimits:
    """Pick the tier by the remaining budget: critical under 4,000 tokens, full over 8,000."""
    if remaining_tokens < 4000:
        return CRITICAL_LIMITS
    if remaining_tokens <= 8000:
        return STANDARD_LIMITS
    return FULL_LIMITS


@dataclass(frozen=True)
class ListedFact:
    """A row the graph follows as it takes it (a fact of the list, a day's key moments, a thought):
    its id, words (a line per fact the graph is to hold), time and the person's messages it stands on."""

    id: int
    text: str
    at: datetime
    message_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class EdgeFact:
    """One fact (a graphiti edge) with its time of validity and the rows it comes from."""

    group: Group
    text: str
    valid_at: datetime | None
    invalid_at: datetime | None
    uuid: str = ""
    # The rows of its group's source (agent/graph/view.py) it comes from.
    row_ids: tuple[int, ...] = ()

    def is_current(self, now: datetime) -> bool:
        """True unless a later fact ended it before `now`."""
        return self.invalid_at is None or self.invalid_at > now


@dataclass(frozen=True)
class GraphResults:
    """Facts per group, best first; only facts that are current at the query's `now`."""

    user: list[EdgeFact] = field(default_factory=list)
    relationship: list[EdgeFact] = field(default_factory=list)
    persona: list[EdgeFact] = field(default_factory=list)

    def of(self, group: Group) -> list[EdgeFact]:
        """The facts of one group."""
        facts: list[EdgeFact] = getattr(self, group)
        return facts

    def all(self) -> list[EdgeFact]:
        """Every fact, user facts first."""
        return [*self.user, *self.relationship, *self.persona]

    def __len__(self) -> int:
        return len(self.user) + len(self.relationship) + len(self.persona)


class KnowledgeGraph(Protocol):
    """Long-term temporal memory of one bot: per user, the three groups of `GROUPS`, each a view of the
    rows it follows (agent/graph/view.py) that points back to them."""

    async def add_facts(self, user_id: int, facts: Sequence[ListedFact], group: Group = "user") -> None:
        """Add rows of the group's source to it, each an episode of its own pointing back to the row
        and its messages; a row added twice is added once."""
        ...

    async def end_facts(self, user_id: int, ids: Sequence[int], at: datetime, group: Group = "user") -> int:
        """These rows of the group's source went at `at`: edges that stand on no other row end then;
        how many ended. Another user's ids end nothing."""
        ...

    async def search(
        self, user_id: int, query: str, *, limits: GroupLimits, now: datetime, vector: Vector | None = None
    ) -> GraphResults:
        """Facts relevant to `query` from the three groups in parallel; superseded facts left out.

        `vector`: the query already embedded by the graph's own embedder (the caller embedded
        it for its own search), so it is not embedded twice.
        """
        ...

    async def forget_user(self, user_id: int) -> None:
        """Delete every node and edge of the user's three groups."""
        ...

    async def export_user(self, user_id: int) -> dict[str, Any]:
        """Everything stored about the user, JSON-ready (for /export)."""
        ...

    async def close(self) -> None:
        """Release connections (and stop the embedded database)."""
        ...
