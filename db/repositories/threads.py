"""A user's conversation threads: opened by post-processing (idempotently), resolved later; caller commits."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import ConversationThread
from db.repositories.dedupe import dedupe_key, insert_ignoring_duplicates, unique_by_key


class ThreadRepository:
    """Open and resolved conversation threads of one user."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def open_for(self, user_id: int, *, limit: int = 50) -> Sequence[ConversationThread]:
        """The user's open threads, newest first."""
        stmt = (
            select(ConversationThread)
            .where(ConversationThread.user_id == user_id, ConversationThread.status == "open")
            .order_by(ConversationThread.created_at.desc(), ConversationThread.id.desc())
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def open_threads(
        self, user_id: int, conversation_id: int | None, threads: Iterable[tuple[str, str]], at: datetime
    ) -> int:
        """Open (type, content) threads from a conversation (None: from a background job); threads
        already opened, even since resolved, are skipped."""
        rows = [
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "type": kind,
                "content": content.strip(),
                "status": "open",
                "dedupe_key": dedupe_key("thread", conversation_id, kind, content),
                "created_at": at,
            }
            for kind, content in threads
            if content.strip()
        ]
        return await insert_ignoring_duplicates(self.session, ConversationThread, unique_by_key(rows))

    async def resolve(
        self, user_id: int, thread_ids: Iterable[int], conversation_id: int, at: datetime
    ) -> int:
        """Resolve the user's open threads among `thread_ids`; other users' ids are ignored."""
        ids = sorted(set(thread_ids))
        if not ids:
            return 0
        result = await self.session.execute(
            update(ConversationThread)
            .where(
                ConversationThread.user_id == user_id,
                ConversationThread.id.in_(ids),
                ConversationThread.status == "open",
            )
            .values(status="resolved", resolved_at=at, resolved_by_conversation_id=conversation_id)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
