"""Test corpora: users with days of messages stored the way the turn stores them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.memory.units import FactUnits
from agent.search.recall import Recall
from bench.fakes.hashing_embedder import HashingEmbedder
from db.models import DaySegment, TranscriptMessage
from db.repositories.day_segments import DaySegmentRepository


def recall_settings(**overrides: object) -> Settings:
    """Settings with small chunks so a handful of messages makes several chunks."""
    values: dict[str, object] = {
        "search_chunk_tokens": 40,
        "search_chunk_max_tokens": 80,
        "search_section_tokens": 20,
        **overrides,
    }
    return Settings(_env_file=None).model_copy(update=values)


def make_recall(
    settings: Settings, sessions: async_sessionmaker[AsyncSession], *, vectors: bool = True
) -> Recall:
    """A Recall on the test database with the hashing embedder (or none)."""
    engine = sessions.kw["bind"]
    return Recall(
        settings=settings,
        sessions=sessions,
        dialect=engine.dialect.name,
        embedder=HashingEmbedder() if vectors else None,
        units=FactUnits.from_settings(settings),
    )


async def add_user(sessions: async_sessionmaker[AsyncSession], key: str) -> int:
    """A user in UTC."""
    user, _ = await get_or_create_user(
        sessions, key=key, now=datetime(2026, 1, 1, tzinfo=UTC), timezone="UTC", name=key
    )
    return user.id


async def add_day(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    day: date,
    texts: Sequence[str],
    *,
    summary: str | None = None,
) -> tuple[int, list[int]]:
    """Store alternating user/assistant messages on one day; returns (segment id, message ids)."""
    ids: list[int] = []
    async with sessions() as session, session.begin():
        start = datetime.combine(day, time(10, 0), tzinfo=UTC)
        segment = await DaySegmentRepository(session).open(user_id, day, "UTC", start)
        for i, text in enumerate(texts):
            at = start + timedelta(minutes=i)
            message = TranscriptMessage(
                user_id=user_id,
                role="user" if i % 2 == 0 else "assistant",
                kind="text",
                content=text,
                sent_at=at,
                day_segment_id=segment.id,
            )
            session.add(message)
            await session.flush()
            DaySegmentRepository.record_message(segment, message.id, at)
            ids.append(message.id)
        if summary is not None:
            await set_summary(session, segment, summary, ids[-1] if ids else None)
        return segment.id, ids


async def set_summary(
    session: AsyncSession, segment: DaySegment, summary: str, last_id: int | None, at: datetime | None = None
) -> None:
    """Write a day summary as the day-summary job does (a new version has a new time)."""
    segment.summary = summary
    segment.last_summarized_message_id = last_id
    segment.summary_updated_at = at or segment.last_message_at
    await session.flush()
