"""Day segments: one row per user and local calendar day, opened and counted by the turn; caller commits."""

from __future__ import annotations

import functools
from datetime import date, datetime

from sqlalchemy import Select, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import DaySegment


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
