"""The rules that keep touchpoints welcome: when a due one is sent, waits, or is dropped.

Read at delivery, not at planning: the user's choice (/followups), their reachability, onboarding,
the thread's state, whether they wrote since the plan, whether the last touchpoint was answered, their
quiet hours (local), one a day (local) and TOUCHPOINT_MAX_PER_WEEK in any seven days.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from agent.core.clock import ensure_utc, zone_of
from agent.core.settings import Settings

WEEK = timedelta(days=7)


@dataclass(frozen=True)
class Subject:
    """What the rules read about one due touchpoint and its user."""

    timezone: str
    followups: bool | None
    unreachable: bool
    onboarded: bool
    last_message_at: datetime | None
    thread_open: bool
    planned_at: datetime
    # Touchpoints sent in the last seven days, and the newest one ever.
    sent_this_week: Sequence[datetime]
    last_sent_at: datetime | None


@dataclass(frozen=True)
class Send:
    """Compose and send it now."""


@dataclass(frozen=True)
class Postpone:
    """Not now: due again at `until` (UTC)."""

    until: datetime
    why: str


@dataclass(frozen=True)
class Cancel:
    """Never: `outcome` says why."""

    outcome: str


Decision = Send | Postpone | Cancel


def enabled_for(followups: bool | None, settings: Settings) -> bool:
    """The user's own choice, or TOUCHPOINT_ENABLED when they made none."""
    return settings.touchpoint_enabled if followups is None else followups


def in_quiet_hours(local: datetime, start: int, end: int) -> bool:
    """True inside [start, end) local hours (wrapping past midnight when start > end)."""
    if start == end:
        return False
    hour = local.hour
    return start <= hour < end if start < end else hour >= start or hour < end


def next_local(now: datetime, zone: ZoneInfo, hour: int, *, days: int = 0) -> datetime:
    """The first local `hour`:00 after `now` (UTC), at least `days` local days ahead."""
    local = ensure_utc(now).astimezone(zone)
    day = local.date() + timedelta(days=days)
    candidate = datetime.combine(day, time(hour), tzinfo=zone)
    if candidate <= local:
        candidate = datetime.combine(day + timedelta(days=1), time(hour), tzinfo=zone)
    return ensure_utc(candidate)


def decide(subject: Subject, now: datetime, settings: Settings) -> Decision:
    """Send, postpone or cancel one due touchpoint."""
    if not enabled_for(subject.followups, settings):
        return Cancel("opted_out")
    if subject.unreachable:
        return Cancel("unreachable")
    if not subject.onboarded:
        return Cancel("onboarding")
    if not subject.thread_open:
        return Cancel("thread_resolved")
    if subject.last_message_at is not None and subject.last_message_at > subject.planned_at:
        return Cancel("user_wrote")
    last = subject.last_sent_at
    if last is not None and (subject.last_message_at is None or subject.last_message_at < last):
        return Cancel("unanswered")  # never chase
    zone = zone_of(subject.timezone)
    local = ensure_utc(now).astimezone(zone)
    start, end = settings.touchpoint_quiet_start_hour, settings.touchpoint_quiet_end_hour
    if in_quiet_hours(local, start, end):
        return Postpone(next_local(now, zone, end), "quiet_hours")
    week = sorted(at for at in subject.sent_this_week if at > now - WEEK)
    if any(ensure_utc(at).astimezone(zone).date() == local.date() for at in week):
        return Postpone(next_local(now, zone, end, days=1), "one_a_day")
    if len(week) >= settings.touchpoint_max_per_week:
        # When the oldest of the week's messages leaves the window, in daytime.
        free = week[len(week) - settings.touchpoint_max_per_week] + WEEK
        return Postpone(max(free, now + timedelta(minutes=1)), "weekly_cap")
    return Send()
