"""A reminder's schedule in the user's zone: repetitions, daylight saving, and what may be set."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agent.core.errors import ReminderRejectedError
from agent.reminders.schedule import first_on_or_after, next_after, parse_local, to_utc
from agent.reminders.store import NewReminder, first_time, snooze_until

LISBON = ZoneInfo("Europe/Lisbon")
# Friday 27 March 2026, 12:00 in Lisbon (WET, UTC+0); the clocks go forward on Sunday the 29th.
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)
START = datetime(2026, 1, 1, tzinfo=UTC)


def _series(start: str, repeat: str, days: list[int], count: int, *, day_of_month: int = 0) -> list[datetime]:
    local = parse_local(start)
    out = [local]
    for _ in range(count - 1):
        following = next_after(out[-1], repeat, days, day_of_month or local.day, now=START, zone=LISBON)  # type: ignore[arg-type]
        assert following is not None
        out.append(following)
    return out


def test_daily_nine_stays_nine_across_the_clock_change() -> None:
    series = _series("2026-03-28 09:00", "daily", [], 3)
    assert [to_utc(local, LISBON).hour for local in series] == [9, 8, 8]  # WET, then WEST
    assert all((local.hour, local.minute) == (9, 0) for local in series)


def test_weekdays_weekly_and_monthly_repeat_on_their_days() -> None:
    assert [d.weekday() for d in _series("2026-03-27 08:00", "weekdays", [], 4)] == [4, 0, 1, 2]
    assert [d.day for d in _series("2026-03-30 08:00", "weekly", [0, 3], 4)] == [30, 2, 6, 9]
    # The 31st: the last day of shorter months, and back to the 31st after.
    assert [d.date().isoformat() for d in _series("2026-01-31 10:00", "monthly", [], 4)] == [
        "2026-01-31",
        "2026-02-28",
        "2026-03-31",
        "2026-04-30",
    ]
    assert next_after(parse_local("2026-03-28 09:00"), "once", [], 28, now=NOW, zone=LISBON) is None


def test_a_late_run_skips_to_the_next_future_occurrence() -> None:
    later = NOW + timedelta(days=3)
    following = next_after(parse_local("2026-03-27 09:00"), "daily", [], 27, now=later, zone=LISBON)
    assert following == parse_local("2026-03-31 09:00")


def test_a_weekly_reminder_starts_on_its_first_day() -> None:
    assert first_on_or_after(parse_local("2026-03-29 08:00"), "weekly", [0]) == parse_local(
        "2026-03-30 08:00"
    )


@pytest.mark.parametrize(
    ("local", "repeat", "problem"),
    [
        ("2026-03-27 11:59", "once", "already passed"),
        ("2027-04-01 09:00", "once", "at most a year"),
        ("2026-03-29 01:30", "once", "does not exist"),  # skipped by the clocks
        ("2026-10-25 01:30", "once", "happens twice"),  # shown twice
        ("2026-03-29 01:30", "daily", "does not exist"),
    ],
)
def test_times_that_cannot_be_set_are_asked_about(local: str, repeat: str, problem: str) -> None:
    with pytest.raises(ReminderRejectedError, match=problem):
        first_time(NewReminder("call mom", parse_local(local), repeat), "Europe/Lisbon", NOW)  # type: ignore[arg-type]


def test_snooze_tomorrow_keeps_the_local_time_across_the_clock_change() -> None:
    saturday_nine = datetime(2026, 3, 28, 9, 0, tzinfo=UTC)
    until = snooze_until("tomorrow", now=saturday_nine, timezone="Europe/Lisbon")
    assert until.astimezone(LISBON).strftime("%Y-%m-%d %H:%M") == "2026-03-29 09:00"
    assert snooze_until("10m", now=saturday_nine, timezone="Europe/Lisbon") == saturday_nine + timedelta(
        minutes=10
    )
