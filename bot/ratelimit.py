"""Per-user rate limits: N messages a minute (in process) and M a day (counted in the database).

The minute window is a sliding window kept in memory: cheap, and a burst is what it guards
against. The day count comes from the transcript (the user's stored messages in the last 24
hours), so it holds across restarts and across several processes behind one webhook. Messages
refused by the limiter are not stored, so they do not count against the day.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import TranscriptMessage

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)


@dataclass(frozen=True)
class Verdict:
    """Whether a message may go on, and which limit stopped it."""

    allowed: bool
    limit: Literal["minute", "day"] | None = None

    @property
    def message(self) -> str:
        """A friendly explanation for the user."""
        if self.limit == "minute":
            return "Whoa, that's a lot of messages at once! Give me a minute to catch up, then write again."
        if self.limit == "day":
            return "We've talked a lot today, and I need a break. Let's pick this up tomorrow!"
        return ""


class RateLimiter:
    """Sliding-window per-minute limit in memory; rolling 24-hour limit from stored messages."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], *, per_minute: int, per_day: int) -> None:
        self.sessions = sessions
        self.per_minute = per_minute
        self.per_day = per_day
        self._recent: dict[int, deque[datetime]] = {}

    async def check(self, user_id: int, now: datetime) -> Verdict:
        """Count this message if it is allowed; refuse it (without counting) when over a limit."""
        recent = self._recent.setdefault(user_id, deque())
        while recent and recent[0] <= now - MINUTE:
            recent.popleft()
        if len(recent) >= self.per_minute:
            return Verdict(False, "minute")
        if await self.stored_today(user_id, now) >= self.per_day:
            return Verdict(False, "day")
        recent.append(now)
        self._forget_idle(now)
        return Verdict(True)

    async def stored_today(self, user_id: int, now: datetime) -> int:
        """The user's messages stored in the 24 hours before `now`."""
        async with self.sessions() as session:
            count = await session.scalar(
                select(func.count())
                .select_from(TranscriptMessage)
                .where(
                    TranscriptMessage.user_id == user_id,
                    TranscriptMessage.role == "user",
                    TranscriptMessage.sent_at > now - DAY,
                )
            )
        return int(count or 0)

    def _forget_idle(self, now: datetime) -> None:
        # Keep memory bounded by active users, not by everyone who ever wrote.
        if len(self._recent) > 10_000:
            for user_id in [u for u, q in self._recent.items() if not q or q[-1] <= now - MINUTE]:
                del self._recent[user_id]
