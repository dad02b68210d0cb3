"""Day segments: one row per user and local calendar day, opened and counted by the turn; caller commits."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import BigInteger, Select, bindparam, case, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import DaySegment, UTCDateTime


@functools.cache
def _for_day() -> Select[DaySegment]:
    # Built once: on every turn, building it cost more than running its cached compiled form.
    return select(DaySegment).where(
        DaySegment.user_id == bindparam("user_id"), DaySegment.day == bindparam("day")
    )


class DaySegmentRepository:
    """Day segments: one row per user and local calendar day."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def for_day(self, user_id: int, day: date) -> DaySegment | None:
        """The user's segment for a calendar day, if it exists."""
        params = {"user_id": user_id, "day": day}
        return (await self.session.execute(_for_day(), params)).scalar_one_or_none()

    async def open(self, user_id: int, day: date, timezone: str, at: datetime) -> DaySegment:
        """The segment for `day`, opened at this message when it is the first of the day."""
        segment = await self.for_day(user_id, day)
        if segment is None:
            segment = DaySegment(
                user_id=user_id,
                day=day,
                timezone=timezone,
                first_message_at=at,
                last_message_at=at,
                message_count=0,
                key_moments=[],
                messages_since_summary=0,
                summary_due=False,
                status="open",
            )
            self.session.add(segment)
            await self.session.flush()
        return segment

    @staticmethod
    def record_message(segment: DaySegment, message_id: int, at: datetime) -> None:
        """Count a stored message into its day."""
        if segment.first_message_id is None:
            segment.first_message_id = message_id
        segment.last_message_id = message_id
        segment.first_message_at = min(segment.first_message_at, at)
        segment.last_message_at = max(segment.last_message_at, at)
        segment.message_count += 1
        segment.messages_since_summary += 1

    async def count_in(self, segment_id: int, message_id: int, at: datetime) -> Counted | None:
        """Count a stored message into its day in one statement, nothing read first (another writer's
        count is kept); what deciding an in-day summary needs, or None when the day is gone."""
        params = {"segment_id": segment_id, "message_id": message_id, "at": at}
        row = (await self.session.execute(_count_in(), params)).one_or_none()
        return Counted(*row) if row is not None else None

    async def mark_summary_due(self, segment_id: int) -> None:
        """Flag the day for an in-day summary (the day-summaries job writes it)."""
        await self.session.execute(
            update(DaySegment)
            .where(DaySegment.id == segment_id)
            .values(summary_due=True)
            .execution_options(synchronize_session=False)
        )


@dataclass(frozen=True)
class Counted:
    """A day as a message was counted into it: what deciding an in-day summary needs."""

    id: int
    summary_due: bool
    status: str
    messages_since_summary: int
    last_summarized_message_id: int | None
    message_count: int


@functools.cache
def _count_in() -> Any:
    # Built once, as `_for_day`: it runs on every answer.
    at = bindparam("at", type_=UTCDateTime())
    message_id = bindparam("message_id", type_=BigInteger())
    return (
        update(DaySegment)
        .where(DaySegment.id == bindparam("segment_id", type_=BigInteger()))
        .values(
            message_count=DaySegment.message_count + 1,
            messages_since_summary=DaySegment.messages_since_summary + 1,
            first_message_id=func.coalesce(DaySegment.first_message_id, message_id),
            last_message_id=message_id,
            first_message_at=case((DaySegment.first_message_at > at, at), else_=DaySegment.first_message_at),
            last_message_at=case((DaySegment.last_message_at < at, at), else_=DaySegment.last_message_at),
        )
        .returning(
            DaySegment.id,
            DaySegment.summary_due,
            DaySegment.status,
            DaySegment.messages_since_summary,
            DaySegment.last_summarized_message_id,
            DaySegment.message_count,
        )
        .execution_options(synchronize_session=False)
    )
