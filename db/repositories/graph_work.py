"""What the knowledge graph has yet to show of a person's rows; the caller commits.

The graph follows one table per group (`SOURCES`): the list of facts (`user_facts`, the user group),
the final days' key moments (`day_segments`, the relationship group: a day's list is rewritten whole
by each summary version, so the day is the item; a day with lines imported from another assistant
is not the companion's shared history), and the persona's thoughts (`thoughts`, the
persona group). Each row records what the graph's episode of it shows (`shown`: the key of its
words, or the summary version of a day's moments; None: nothing). A row the graph is to show
(`held`) whose record differs from its words is to be written; one no longer held that still has a
record is to be ended. Which people to look at is the per-person marker's
(db/repositories/consolidations.py's `GRAPH`), set in the transaction that changed the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, null, or_, select, true, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import DaySegment, FactConsolidation, Thought, TranscriptMessage, UserFact
from db.repositories.facts import HELD


@dataclass(frozen=True)
class Source:
    """A table the graph follows: which rows it shows, their words' key, what it shows of them, and
    when a row stopped being shown (NULL: when the graph follows)."""

    model: Any
    held: ColumnElement[bool]
    words: Any
    shown: Any
    ended: Any

    @property
    def due(self) -> ColumnElement[bool]:
        """Rows whose record differs from what the graph is to show of them."""
        unshown = or_(self.shown.is_(None), self.shown != self.words)
        return or_(and_(self.held, unshown), and_(~self.held, self.shown.is_not(None)))


_IMPORTED = exists().where(
    TranscriptMessage.day_segment_id == DaySegment.id, TranscriptMessage.kind == "imported"
)
SOURCES = {
    "user": Source(UserFact, HELD, UserFact.dedupe_key, UserFact.graph_key, UserFact.invalidated_at),
    "relationship": Source(
        DaySegment,
        and_(DaySegment.status == "final", DaySegment.summary_updated_at.is_not(None), ~_IMPORTED),
        DaySegment.summary_updated_at,
        DaySegment.graph_version,
        null(),
    ),
    "persona": Source(Thought, true(), Thought.dedupe_key, Thought.graph_key, null()),
}


@dataclass(frozen=True)
class Due:
    """A row the graph does not show as it stands: whether it is to be shown (`held`), what the graph
    shows of it now (`shown`, None: nothing) and is to show (`words`), when it stopped being shown
    if its source says (`ended`)."""

    group: str
    row: Any
    held: bool
    shown: Any
    words: Any
    ended: Any


async def unshown(session: AsyncSession, owner_id: int) -> list[Due]:
    """The owner's rows the graph does not show as they stand, group by group, oldest first."""
    found: list[Due] = []
    for group, s in SOURCES.items():
        stmt = select(s.model, s.held, s.shown, s.words, s.ended).where(s.model.user_id == owner_id, s.due)
        found += [Due(group, *row) for row in (await session.execute(stmt.order_by(s.model.id))).all()]
    return found


async def record_shown(session: AsyncSession, owner_id: int, shown: Mapping[tuple[str, int], Any]) -> None:
    """Record what the graph now shows of these rows ((group, id): their words, or None for nothing)."""
    for (group, row_id), value in shown.items():
        source = SOURCES[group]
        await session.execute(
            update(source.model)
            .where(source.model.user_id == owner_id, source.model.id == row_id)
            .values({source.shown: value})
            .execution_options(synchronize_session=False)
        )


async def shown_ids(session: AsyncSession, owner_id: int, group: str, ids: Iterable[int]) -> set[int]:
    """Which of these rows of the owner's the graph shows as they stand (a row gone, changed or no
    longer held is not among them)."""
    source, wanted = SOURCES[group], sorted(set(ids))
    if not wanted:
        return set()
    model = source.model
    stmt = select(model.id).where(
        model.user_id == owner_id, model.id.in_(wanted), source.held, source.shown == source.words
    )
    return set((await session.scalars(stmt)).all())


async def forget_shown(session: AsyncSession, owner_id: int) -> None:
    """The owner's graph was cleared: it shows none of their rows."""
    for source in SOURCES.values():
        await session.execute(
            update(source.model)
            .where(source.model.user_id == owner_id, source.shown.is_not(None))
            .values({source.shown: None})
            .execution_options(synchronize_session=False)
        )


async def settle_without_graph(session: AsyncSession) -> int:
    """With the graph off, every person counts as followed (nothing waits for a graph that is not
    there; `reindex --graph-from-facts` writes a graph turned on later); how many were due."""
    row = FactConsolidation
    due = or_(row.graphed_for.is_(None), row.graph_changed_at > row.graphed_for)
    result = await session.execute(
        update(row)
        .where(due)
        .values(graphed_for=row.graph_changed_at)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
