"""The transcript: every message as a row, the source of truth for search and export; the caller commits."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import CursorResult, Insert, Table, bindparam, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import make_transient_to_detached

from db.models import TranscriptMessage

# Bound parameters per query stay well under both databases' limits (32,766 and 32,767).
_IDS_PER_QUERY = 5000
_COLUMNS = (
    "user_id",
    "conversation_id",
    "role",
    "kind",
    "content",
    "telegram_message_id",
    "reply_to_id",
    "day_segment_id",
    "sent_at",
    "speaker_telegram_id",
    "speaker_name",
)


class SaidLine(NamedTuple):
    """One line a person (in a group, a member) wrote, as a fact's source shows it."""

    id: int
    sent_at: datetime
    # The first characters of the line only: a source is quoted briefly.
    text: str
    kind: str
    speaker_name: str | None


@functools.cache
def _add() -> Insert:
    table = cast(Table, TranscriptMessage.__table__)
    return insert(table).values({name: bindparam(name) for name in _COLUMNS})


class TranscriptRepository:
    """The transcript: every message as a row, the source of truth for search and export."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(
        self,
        *,
        user_id: int,
        conversation_id: int | None,
        role: str,
        content: str,
        sent_at: datetime,
        kind: str = "text",
        telegram_message_id: int | None = None,
        reply_to_id: int | None = None,
        day_segment_id: int | None = None,
        speaker_telegram_id: int | None = None,
        speaker_name: str | None = None,
    ) -> TranscriptMessage:
        """Insert one message after the session's pending changes, in order; the row, with its id."""
        values = {
            "user_id": user_id,
            "conversation_id": conversation_id,
            "role": role,
            "kind": kind,
            "content": content,
            "telegram_message_id": telegram_message_id,
            "reply_to_id": reply_to_id,
            "day_segment_id": day_segment_id,
            "sent_at": sent_at,
            "speaker_telegram_id": speaker_telegram_id,
            "speaker_name": speaker_name,
        }
        await self.session.flush()
        # A Core statement built once, the ORM's own INSERT: every turn stores two messages, and the
        # unit of work cost several times the statement.
        result = cast(CursorResult[Any], await self.session.execute(_add(), values))
        key = result.inserted_primary_key
        assert key is not None  # a single-row insert always has one
        # In the session as a row loaded from the database: a change to it is flushed, as before.
        message = TranscriptMessage(id=key[0], **values)
        make_transient_to_detached(message)
        self.session.add(message)
        return message

    async def by_telegram_id(self, user_id: int, telegram_message_id: int) -> TranscriptMessage | None:
        """The user's message with this Telegram id, if already stored (retried delivery)."""
        stmt = select(TranscriptMessage).where(
            TranscriptMessage.user_id == user_id,
            TranscriptMessage.role == "user",
            TranscriptMessage.telegram_message_id == telegram_message_id,
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def reply_to(self, message_id: int) -> TranscriptMessage | None:
        """The assistant message that answered a stored user message."""
        stmt = (
            select(TranscriptMessage)
            .where(TranscriptMessage.reply_to_id == message_id, TranscriptMessage.role == "assistant")
            .order_by(TranscriptMessage.id)
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def for_conversation(self, conversation_id: int) -> Sequence[TranscriptMessage]:
        """All messages of a conversation in order."""
        stmt = (
            select(TranscriptMessage)
            .where(TranscriptMessage.conversation_id == conversation_id)
            .order_by(TranscriptMessage.sent_at, TranscriptMessage.id)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def said_lines(
        self, owner_id: int, message_ids: Iterable[int], *, chars: int
    ) -> dict[int, SaidLine]:
        """The owner's lines among these ids that a person wrote and that still hold words, each cut to
        its first `chars` characters; the companion's lines, blanked lines and ids of another owner
        (a private chat's in a group's read, a group's in a private one) find nothing."""
        ids = sorted({int(i) for i in message_ids})
        found: dict[int, SaidLine] = {}
        for start in range(0, len(ids), _IDS_PER_QUERY):
            stmt = select(
                TranscriptMessage.id,
                TranscriptMessage.sent_at,
                func.substr(TranscriptMessage.content, 1, chars),
                TranscriptMessage.kind,
                TranscriptMessage.speaker_name,
            ).where(
                TranscriptMessage.user_id == owner_id,
                TranscriptMessage.role == "user",
                TranscriptMessage.content != "",
                TranscriptMessage.id.in_(ids[start : start + _IDS_PER_QUERY]),
            )
            for row in (await self.session.execute(stmt)).all():
                found[int(row[0])] = SaidLine(int(row[0]), row[1], row[2], row[3], row[4])
        return found
