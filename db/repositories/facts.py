"""Durable facts about a user, each with the transcript messages it comes from; the caller commits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import UserFact
from db.repositories.dedupe import fact_dedupe_key, insert_ignoring_duplicates, unique_by_key


class FactRepository:
    """Durable facts about a user, each with the transcript messages it comes from."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add_many(
        self,
        user_id: int,
        conversation_id: int | None,
        contents: Iterable[str],
        at: datetime,
        *,
        source: str,
        category: str | None = None,
    ) -> int:
        """Store facts without sources; a fact already known (same normalised content) is skipped."""
        return await self.add_sourced(
            user_id, conversation_id, [(c, ()) for c in contents], at, source=source, category=category
        )

    async def add_sourced(
        self,
        user_id: int,
        conversation_id: int | None,
        facts: Iterable[tuple[str, Sequence[int]]],
        at: datetime,
        *,
        source: str,
        category: str | None = None,
    ) -> int:
        """Store (content, message ids) facts; returns how many are new.

        A fact already known keeps its row and gains the new message ids (the same fact said again
        points at both places), so a rerun changes nothing.
        """
        sources: dict[str, set[int]] = {}
        rows: list[dict[str, Any]] = []
        for content, message_ids in facts:
            if not content.strip():
                continue
            key = fact_dedupe_key(content)
            sources.setdefault(key, set()).update(int(i) for i in message_ids)
            rows.append(
                {
                    "user_id": user_id,
                    "conversation_id": conversation_id,
                    "content": content.strip(),
                    "source": source,
                    "category": category,
                    "message_ids": [],
                    "dedupe_key": key,
                    "created_at": at,
                }
            )
        for row in rows:
            row["message_ids"] = sorted(sources[row["dedupe_key"]])
        created = await insert_ignoring_duplicates(self.session, UserFact, unique_by_key(rows))
        wanted = {k: v for k, v in sources.items() if v}
        if wanted:
            stored = await self.session.execute(
                select(UserFact.id, UserFact.dedupe_key, UserFact.message_ids).where(
                    UserFact.user_id == user_id, UserFact.dedupe_key.in_(list(wanted))
                )
            )
            for fact_id, key, known in stored.all():
                merged = sorted(set(known or []) | wanted[key])
                if merged != sorted(known or []):
                    await self.session.execute(
                        update(UserFact)
                        .where(UserFact.id == fact_id)
                        .values(message_ids=merged)
                        .execution_options(synchronize_session=False)
                    )
        return created

    async def for_user(self, user_id: int) -> Sequence[UserFact]:
        """All facts of a user still held (none taken back), oldest first."""
        stmt = (
            select(UserFact)
            .where(UserFact.user_id == user_id, UserFact.invalidated_at.is_(None))
            .order_by(UserFact.id)
        )
        return (await self.session.execute(stmt)).scalars().all()
