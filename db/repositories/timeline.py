"""Reads of the timeline Mini App: a user's days, one day's transcript, its compactions.

Every query is scoped to one user id, which the caller takes from the signed-in Telegram identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import DaySegment, HistoryCompaction, TranscriptMessage


class TimelineRepository:
    """What the timeline shows, read-only."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def segments(self, user_id: int) -> Sequence[DaySegment]:
        """Every day segment of the user, newest day first."""
        stmt = select(DaySegment).where(DaySegment.user_id == user_id).order_by(DaySegment.day.desc())
        return (await self.session.execute(stmt)).scalars().all()

    async def unsegmented_times(self, user_id: int, *, limit: int = 1000) -> Sequence[datetime]:
        """Times of the user's messages that belong to no day segment (onboarding)."""
        stmt = (
            select(TranscriptMessage.sent_at)
            .where(TranscriptMessage.user_id == user_id, TranscriptMessage.day_segment_id.is_(None))
            .order_by(TranscriptMessage.sent_at)
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def messages(
        self, user_id: int, segment_id: int | None, start: datetime, end: datetime, *, limit: int
    ) -> Sequence[TranscriptMessage]:
        """The day's messages, system notes included, in order: the segment's, plus unsegmented ones
        (onboarding) sent between `start` and `end`."""
        in_day = (
            TranscriptMessage.day_segment_id.is_(None)
            & (TranscriptMessage.sent_at >= start)
            & (TranscriptMessage.sent_at < end)
        )
        if segment_id is not None:
            in_day = in_day | (TranscriptMessage.day_segment_id == segment_id)
        stmt = (
            select(TranscriptMessage)
            .where(TranscriptMessage.user_id == user_id, in_day)
            .order_by(TranscriptMessage.sent_at, TranscriptMessage.id)
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def compactions(self, user_id: int, start: datetime, end: datetime) -> Sequence[HistoryCompaction]:
        """History compactions of the user made between `start` and `end`, oldest first."""
        stmt = (
            select(HistoryCompaction)
            .where(
                HistoryCompaction.user_id == user_id,
                HistoryCompaction.created_at >= start,
                HistoryCompaction.created_at < end,
            )
            .order_by(HistoryCompaction.created_at, HistoryCompaction.id)
        )
        return (await self.session.execute(stmt)).scalars().all()
