"""What the knowledge graph has yet to show of a person's facts (`user_facts.graph_key`); the
caller commits.

A fact's `graph_key` is the dedupe key of the words the graph's episode of it shows (None: the graph
shows nothing of it). A held fact whose key differs (new, reworded, held again) is to be written;
a taken-back one that still has a key is to be ended. Which people to look at is the per-person
marker's (db/repositories/consolidations.py's `GRAPH`), set in the transaction that changed the list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import and_, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import FactConsolidation, UserFact
from db.repositories.facts import HELD

_UNSHOWN = or_(UserFact.graph_key.is_(None), UserFact.graph_key != UserFact.dedupe_key)
_DUE = or_(and_(HELD, _UNSHOWN), and_(~HELD, UserFact.graph_key.is_not(None)))


async def unshown_facts(session: AsyncSession, owner_id: int) -> Sequence[UserFact]:
    """The owner's facts the graph does not show as the list holds them, oldest first."""
    stmt = select(UserFact).where(UserFact.user_id == owner_id, _DUE).order_by(UserFact.id)
    return (await session.execute(stmt)).scalars().all()


async def record_shown(session: AsyncSession, owner_id: int, keys: Mapping[int, str | None]) -> None:
    """Record what the graph now shows of these facts (a key, or None for nothing)."""
    for fact_id, key in keys.items():
        await session.execute(
            update(UserFact)
            .where(UserFact.user_id == owner_id, UserFact.id == fact_id)
            .values(graph_key=key)
            .execution_options(synchronize_session=False)
        )


async def forget_shown(session: AsyncSession, owner_id: int) -> None:
    """The owner's graph was cleared: it shows none of their facts."""
    await session.execute(
        update(UserFact)
        .where(UserFact.user_id == owner_id, UserFact.graph_key.is_not(None))
        .values(graph_key=None)
        .execution_options(synchronize_session=False)
    )


async def settle_without_graph(session: AsyncSession) -> int:
    """With the graph off, every person counts as followed (nothing waits for a graph that is not
    there; `reindex --graph-from-facts` writes a graph turned on later); how many were due."""
    row = FactConsolidation
    due = or_(row.graphed_for.is_(None), row.changed_at > row.graphed_for)
    result = await session.execute(
        update(row).where(due).values(graphed_for=row.changed_at).execution_options(synchronize_session=False)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
