"""The one source of "now": injectable so tests and benchmarks control time; instants in a user's zone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def system_now() -> datetime:
    """The wall clock in UTC; the only call to `datetime.now` in the project."""
    return datetime.now(UTC)


@dataclass
class Clock:
    """Gives the current time; message handling uses the message's own time instead."""

    source: Callable[[], datetime] = field(default=system_now)

    def now(self) -> datetime:
        """Return an aware UTC datetime."""
        return ensure_utc(self.source())


@dataclass
class ShiftedClock(Clock):
    """The wall clock moved forward by `shift` (the terminal chat's `/wait`): time still passes."""

    shift: timedelta = field(default_factory=timedelta)

    def __post_init__(self) -> None:
        wall = self.source
        self.source = lambda: wall() + self.shift

    def advance(self, delta: timedelta) -> None:
        """Move time forward."""
        self.shift += delta

    def not_before(self, moment: datetime) -> None:
        """Move time forward to `moment` when it is still ahead (a `/wait` before a restart)."""
        ahead = ensure_utc(moment) - self.now()
        if ahead > timedelta():
            self.shift += ahead


def ensure_utc(value: datetime) -> datetime:
    """Treat naive datetimes (SQLite returns them) as UTC and convert aware ones to UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def local_day(at: datetime, timezone: str) -> date:
    """The calendar day of an instant in a user's IANA time zone (day segments follow it)."""
    return ensure_utc(at).astimezone(ZoneInfo(timezone)).date()


def zone_of(timezone: str) -> ZoneInfo:
    """The zone of that name; UTC when it is unknown."""
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def local_label(at: datetime, timezone: str) -> str:
    """An instant as the user reads it: "Thursday 2026-11-26 18:40 (Europe/Paris)"."""
    local = ensure_utc(at).astimezone(zone_of(timezone))
    return f"{local:%A %Y-%m-%d %H:%M} ({timezone})"
