"""When a reminder comes round: its occurrences as local wall-clock times, turned into UTC instants.

The schedule lives in local time ("9:00 on weekdays") and each occurrence is resolved in the user's
zone only when it is planned, so a daylight-saving change never moves "9:00", and a new time zone
keeps the same local time. A local time the clocks skip (02:30 on the spring-forward night) is
refused when set and, for a repeating reminder, sent at the same wall-clock offset after the jump.
"""

from __future__ import annotations

import calendar
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

Repeat = Literal["once", "daily", "weekdays", "weekly", "monthly"]
DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# Local "YYYY-MM-DDTHH:MM", as stored and as the model gives it.
LOCAL_FORMAT = "%Y-%m-%dT%H:%M"


def parse_local(text: str) -> datetime:
    """A naive local datetime from "YYYY-MM-DD HH:MM" (or with a T); ValueError when unreadable."""
    cleaned = text.strip().replace(" ", "T", 1)
    parsed = datetime.fromisoformat(cleaned)
    if parsed.tzinfo is not None:
        raise ValueError("give the local time without an offset")
    return parsed.replace(second=0, microsecond=0)


def format_local(local: datetime) -> str:
    """The stored form of a local time."""
    return local.strftime(LOCAL_FORMAT)


def to_utc(local: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of a naive local time in `zone` (the earlier one when the clocks repeat it)."""
    return local.replace(tzinfo=zone, fold=0).astimezone(UTC)


def exists(local: datetime, zone: ZoneInfo) -> bool:
    """False for a local time the clocks skip (it does not round-trip through UTC)."""
    return to_utc(local, zone).astimezone(zone).replace(tzinfo=None) == local


def repeated(local: datetime, zone: ZoneInfo) -> bool:
    """True for a local time the clocks show twice (the autumn night's repeated hour)."""
    first = local.replace(tzinfo=zone, fold=0).utcoffset()
    second = local.replace(tzinfo=zone, fold=1).utcoffset()
    return first != second and exists(local, zone)


def _monthly(after: date, day_of_month: int) -> date:
    """The same day next month, or the month's last day when it is shorter."""
    year, month = (after.year + 1, 1) if after.month == 12 else (after.year, after.month + 1)
    return date(year, month, min(day_of_month, calendar.monthrange(year, month)[1]))


def following(local: datetime, repeat: Repeat, days: Sequence[int], day_of_month: int) -> datetime | None:
    """The occurrence after `local` (naive, local), or None for a one-off."""
    if repeat == "once":
        return None
    if repeat == "monthly":
        return datetime.combine(_monthly(local.date(), day_of_month), local.time())
    allowed = {0, 1, 2, 3, 4} if repeat == "weekdays" else set(days) if repeat == "weekly" else set(range(7))
    if not allowed:
        allowed = {local.weekday()}
    candidate = local + timedelta(days=1)
    while candidate.weekday() not in allowed:
        candidate += timedelta(days=1)
    return candidate


def first_on_or_after(local: datetime, repeat: Repeat, days: Sequence[int]) -> datetime:
    """The first occurrence at or after `local` (a weekly reminder on Mondays set for a Sunday starts
    on Monday)."""
    if repeat in ("once", "daily", "monthly"):
        return local
    allowed = {0, 1, 2, 3, 4} if repeat == "weekdays" else set(days) or {local.weekday()}
    candidate = local
    while candidate.weekday() not in allowed:
        candidate += timedelta(days=1)
    return candidate


def next_after(
    local: datetime, repeat: Repeat, days: Sequence[int], day_of_month: int, *, now: datetime, zone: ZoneInfo
) -> datetime | None:
    """The first occurrence after `local` whose instant is after `now` (UTC); None for a one-off."""
    candidate = following(local, repeat, days, day_of_month)
    while candidate is not None and to_utc(candidate, zone) <= now:
        candidate = following(candidate, repeat, days, day_of_month)
    return candidate


def describe(repeat: Repeat, days: Sequence[int]) -> str:
    """The repetition in words: "once", "every day", "on weekdays", "every mon, thu", "every month"."""
    if repeat == "weekly":
        return "every " + ", ".join(DAY_NAMES[d] for d in sorted(days))
    return {"once": "once", "daily": "every day", "weekdays": "on weekdays", "monthly": "every month"}.get(
        repeat, repeat
    )


def label(local: datetime) -> str:
    """A local time as the user reads it: "Monday 9 March 2026 at 09:00"."""
    return f"{local:%A} {local.day} {local:%B %Y} at {local:%H:%M}"
