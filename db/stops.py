"""The `draft_stops` table's statements: a stop pressed on a draft, asked about, and pruned.

The caller owns the transaction. A stop arrives as an update without a sender, so it is stored with
the inbox's batch (db/inbox.py) and never waits in its chat's queue behind the turn it stops.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import DraftStop


async def add_stops(session: AsyncSession, stops: Sequence[tuple[int, int]], *, now: datetime) -> None:
    """Record stops as (chat_id, draft_id); a stop heard twice is kept once."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    rows = [{"chat_id": chat_id, "draft_id": draft_id, "stopped_at": now} for chat_id, draft_id in stops]
    await session.execute(dialect.insert(DraftStop).values(rows).on_conflict_do_nothing())


async def is_stopped(session: AsyncSession, chat_id: int, draft_id: int) -> bool:
    """Whether the stop button of this draft was pressed."""
    found = await session.scalar(
        select(DraftStop.draft_id).where(DraftStop.chat_id == chat_id, DraftStop.draft_id == draft_id)
    )
    return found is not None


async def prune_stops(session: AsyncSession, *, before: datetime) -> int:
    """Delete stops older than `before` (their turns ended long ago)."""
    result = await session.execute(delete(DraftStop).where(DraftStop.stopped_at < before))
    return int(getattr(result, "rowcount", 0) or 0)


async def forget_stops(session: AsyncSession, chat_id: int) -> None:
    """Delete the stops pressed in one chat (/forget of the person whose private chat it is)."""
    await session.execute(delete(DraftStop).where(DraftStop.chat_id == chat_id))
