"""Writing an imported conversation the way the schema says an import stores one (for the tests of
what happens after: the pacer, post-processing, the reading side)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.clock import local_day
from db.models import IMPORT_WAITING, OTHER, Conversation, ImportRun, TranscriptMessage
from db.repositories.day_segments import DaySegmentRepository

# (role, text, sent_at): role "user" is the person, OTHER the other assistant.
Said = tuple[str, str, datetime]


async def import_run(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    *,
    source: str = "chatgpt",
    status: str = "stored",
    at: datetime,
    name: str = "conversations.json",
) -> int:
    """An import run of the person's, stored (or `status`)."""
    async with sessions() as session, session.begin():
        run = ImportRun(
            user_id=user_id,
            source=source,
            digest=hashlib.sha256(f"{user_id}:{source}:{name}".encode()).hexdigest(),
            file_name=name,
            status=status,
            created_at=at,
        )
        session.add(run)
        await session.flush()
        return run.id


async def imported_conversation(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    import_id: int,
    lines: Sequence[Said],
    *,
    source: str = "chatgpt",
    external_id: str | None = None,
    timezone: str = "UTC",
    today: datetime,
) -> tuple[int, list[int]]:
    """One imported conversation and its lines (kind "imported", the person's or OTHER), each counted
    into its local day's segment as the importer opens it; (conversation id, line ids)."""
    first, last = lines[0][2], lines[-1][2]
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=user_id,
            status=IMPORT_WAITING,
            started_at=first,
            last_message_at=last,
            ended_at=last,
            messages=[],
            message_count=len(lines),
            kind=source,
            import_id=import_id,
            external_id=external_id or f"{source}-{first.isoformat()}",
        )
        session.add(conversation)
        await session.flush()
        ids = []
        segments = DaySegmentRepository(session)
        for role, text, at in lines:
            assert role in ("user", OTHER)
            segment = await segments.open_imported(
                user_id, local_day(at, timezone), timezone, at, today=local_day(today, timezone)
            )
            message = TranscriptMessage(
                user_id=user_id,
                conversation_id=conversation.id,
                role=role,
                kind="imported",
                content=text,
                sent_at=at,
                day_segment_id=segment.id,
            )
            session.add(message)
            await session.flush()
            DaySegmentRepository.record_message(segment, message.id, at)
            ids.append(message.id)
        return conversation.id, ids


async def person(
    sessions: async_sessionmaker[AsyncSession], key: str, *, now: datetime, timezone: str = "UTC"
) -> int:
    """A person (private chat) by key."""
    user, _ = await get_or_create_user(sessions, key=key, now=now, timezone=timezone, name=key.split(":")[-1])
    return user.id
