"""Writing an imported conversation with the importer's own statements, from lines given in the test
(for the tests of what happens after: the pacer, post-processing, the reading side)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import date, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.clock import local_day
from db.models import OTHER, ImportRun
from db.repositories.imports import DaySpan, ImportRepository, NewLine

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
    assert all(role in ("user", OTHER) for role, _, _ in lines)
    new_lines = [NewLine(role, text, at, local_day(at, timezone)) for role, text, at in lines]
    spans: dict[date, DaySpan] = {}
    for line in new_lines:
        spans.setdefault(line.day, DaySpan(line.sent_at, line.sent_at)).add(line.sent_at)
    async with sessions() as session, session.begin():
        # The importer's own statements (agent/account/import_store.py), without its run's lease.
        repository = ImportRepository(session)
        conversation_id = await repository.add_conversation(
            user_id=user_id,
            import_id=import_id,
            source=source,
            external_id=external_id or f"{source}-{lines[0][2].isoformat()}",
            lines=new_lines,
        )
        segments = await repository.open_days(user_id, spans, timezone, today=local_day(today, timezone))
        ids = await repository.add_lines(
            user_id=user_id, conversation_id=conversation_id, lines=new_lines, segments=segments
        )
        for message_id, line in zip(ids, new_lines, strict=True):
            span = spans[line.day]
            span.first_id = span.first_id or message_id
            span.last_id = message_id
        await repository.count_into_days({segments[day]: span for day, span in spans.items()})
        return conversation_id, ids


async def person(
    sessions: async_sessionmaker[AsyncSession], key: str, *, now: datetime, timezone: str = "UTC"
) -> int:
    """A person (private chat) by key."""
    user, _ = await get_or_create_user(sessions, key=key, now=now, timezone=timezone, name=key.split(":")[-1])
    return user.id
