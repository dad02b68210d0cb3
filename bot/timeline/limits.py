"""The per-user limit on "Regenerate summary" (each request costs one summary model call).

A sliding minute and a rolling day per Telegram identity, kept in the process. Issue 11 moves the
bot's rate limits into the database keyed by a hash of the identity (`bot/ratelimit.py`); this
limit has the same shape (identity, per minute, per day) so it can become one more scope there.
Until then a second instance keeps its own counts, and a restart starts them again.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta
from typing import Literal

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)

Window = Literal["minute", "day"]


class RegenerateLimit:
    """At most `per_minute` requests in any minute and `per_day` in any 24 hours (0 = no limit)."""

    def __init__(self, *, per_minute: int, per_day: int, max_identities: int = 10_000) -> None:
        self.per_minute = per_minute
        self.per_day = per_day
        self.max_identities = max_identities
        self._seen: dict[str, deque[datetime]] = {}

    def check(self, identity: str, now: datetime) -> Window | None:
        """Count the request and return None, or return the window it would exceed (not counted)."""
        times = self._seen.setdefault(identity, deque())
        while times and times[0] <= now - DAY:
            times.popleft()
        in_minute = sum(1 for t in times if t > now - MINUTE)
        if self.per_minute > 0 and in_minute >= self.per_minute:
            return "minute"
        if self.per_day > 0 and len(times) >= self.per_day:
            return "day"
        times.append(now)
        self._bound(now)
        return None

    def _bound(self, now: datetime) -> None:
        # Memory stays bounded by the people who asked in the last day.
        if len(self._seen) > self.max_identities:
            for identity in [i for i, t in self._seen.items() if not t or t[-1] <= now - DAY]:
                del self._seen[identity]
