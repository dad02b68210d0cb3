"""The persona's thoughts about a user: stored idempotently, shown until marked used; the caller commits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import Thought
from db.repositories.dedupe import dedupe_key, insert_ignoring_duplicates, unique_by_key
from db.repositories.facts import mark_changed


class ThoughtRepository:
    """The persona's thoughts about a user."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add_many(
        self, user_id: int, conversation_id: int, contents: Iterable[str], at: datetime
    ) -> int:
        """Store thoughts from a conversation; already-stored ones are skipped."""
        rows = [
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "content": content.strip(),
                "dedupe_key": dedupe_key("thought", conversation_id, content),
                "created_at": at,
            }
            for content in contents
            if content.strip()
        ]
        added = await insert_ignoring_duplicates(self.session, Thought, unique_by_key(rows))
        if added:
            await mark_changed(self.session, user_id, at, facts=False)  # the graph's persona group
        return added

    async def unshared(self, user_id: int, *, limit: int) -> Sequence[Thought]:
        """The newest thoughts not marked used, newest first (those the context shows)."""
        stmt = (
            select(Thought)
            .where(Thought.user_id == user_id, Thought.used_at.is_(None))
            .order_by(Thought.created_at.desc(), Thought.id.desc())
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def mark_used(self, user_id: int, thought_ids: Iterable[int], at: datetime) -> int:
        """Mark the user's thoughts as shared (the context shows them no more); returns how many."""
        ids = sorted(set(thought_ids))
        if not ids:
            return 0
        result = await self.session.execute(
            update(Thought)
            .where(Thought.user_id == user_id, Thought.id.in_(ids), Thought.used_at.is_(None))
            .values(used_at=at)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
