"""A user's data as a whole: export it, or forget it from every store.

The database rows go with the user row (every table references `users` with ON DELETE CASCADE).
Stores outside those tables (search indexes, the knowledge graph) implement `UserDataStore` and
are passed in, so `/forget` cannot silently miss one that the runtime knows about.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import (
    Conversation,
    ConversationThread,
    DaySegment,
    Thought,
    TranscriptMessage,
    User,
    UserFact,
)


class UserDataStore(Protocol):
    """A store holding user data outside the core tables."""

    name: str

    async def export_user(self, user_id: int) -> Any:
        """Everything this store holds about the user, JSON-serialisable."""
        ...

    async def forget_user(self, user_id: int) -> None:
        """Delete everything this store holds about the user."""
        ...


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


async def export_user(
    sessions: async_sessionmaker[AsyncSession], user_id: int, stores: Sequence[UserDataStore] = ()
) -> dict[str, Any]:
    """The user's data as one JSON-serialisable document."""
    async with sessions() as session:
        user = await session.get(User, user_id)
        if user is None:
            return {}
        conversations = (
            await session.execute(
                select(Conversation).where(Conversation.user_id == user_id).order_by(Conversation.id)
            )
        ).scalars()
        messages = (
            await session.execute(
                select(TranscriptMessage)
                .where(TranscriptMessage.user_id == user_id)
                .order_by(TranscriptMessage.id)
            )
        ).scalars()
        days = (
            await session.execute(
                select(DaySegment).where(DaySegment.user_id == user_id).order_by(DaySegment.day)
            )
        ).scalars()
        threads = (
            await session.execute(select(ConversationThread).where(ConversationThread.user_id == user_id))
        ).scalars()
        thoughts = (await session.execute(select(Thought).where(Thought.user_id == user_id))).scalars()
        facts = (await session.execute(select(UserFact).where(UserFact.user_id == user_id))).scalars()
        document: dict[str, Any] = {
            "user": {
                "name": user.name,
                "timezone": user.timezone,
                "profile": user.profile,
                "created_at": _iso(user.created_at),
                "last_message_at": _iso(user.last_message_at),
            },
            "conversations": [
                {
                    "id": c.id,
                    "kind": c.kind,
                    "status": c.status,
                    "started_at": _iso(c.started_at),
                    "last_message_at": _iso(c.last_message_at),
                    "summary": c.summary,
                    "tone": c.tone,
                }
                for c in conversations
            ],
            "messages": [
                {
                    "id": m.id,
                    "conversation_id": m.conversation_id,
                    "role": m.role,
                    "kind": m.kind,
                    "content": m.content,
                    "sent_at": _iso(m.sent_at),
                }
                for m in messages
            ],
            "days": [
                {
                    "day": d.day.isoformat(),
                    "summary": d.summary,
                    "key_moments": d.key_moments,
                    "status": d.status,
                }
                for d in days
            ],
            "threads": [
                {"type": t.type, "content": t.content, "status": t.status, "created_at": _iso(t.created_at)}
                for t in threads
            ],
            "thoughts": [{"content": t.content, "created_at": _iso(t.created_at)} for t in thoughts],
            "facts": [
                {
                    "content": f.content,
                    "source": f.source,
                    "category": f.category,
                    "created_at": _iso(f.created_at),
                }
                for f in facts
            ],
        }
    for store in stores:
        document[store.name] = await store.export_user(user_id)
    return document


async def forget_user(
    sessions: async_sessionmaker[AsyncSession], user_id: int, stores: Sequence[UserDataStore] = ()
) -> None:
    """Delete the user from every store; the external stores first, so a failure leaves the user findable."""
    for store in stores:
        await store.forget_user(user_id)
    async with sessions() as session, session.begin():
        await session.execute(delete(User).where(User.id == user_id))
