"""The rules that keep follow-ups welcome, read at delivery."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agent.core.settings import Settings
from agent.touchpoints.rules import Cancel, Postpone, Send, Subject, decide, in_quiet_hours

NOW = datetime(2026, 3, 6, 14, 0, tzinfo=UTC)  # a Friday, 14:00 UTC
SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]


def subject(**changes: object) -> Subject:
    values: dict[str, object] = {
        "timezone": "UTC",
        "followups": None,
        "unreachable": False,
        "onboarded": True,
        "last_message_at": NOW - timedelta(days=2),
        "thread_open": True,
        "planned_at": NOW - timedelta(days=1),
        "sent_this_week": (),
        "last_sent_at": None,
    }
    values.update(changes)
    return Subject(**values)  # type: ignore[arg-type]


def test_a_welcome_follow_up_is_sent() -> None:
    assert decide(subject(), NOW, SETTINGS) == Send()


def test_choices_and_states_cancel() -> None:
    assert decide(subject(followups=False), NOW, SETTINGS) == Cancel("opted_out")
    off_by_default = SETTINGS.model_copy(update={"touchpoint_enabled": False})
    assert decide(subject(), NOW, off_by_default) == Cancel("opted_out")
    assert decide(subject(followups=True), NOW, off_by_default) == Send()
    assert decide(subject(onboarded=False), NOW, SETTINGS) == Cancel("onboarding")
    assert decide(subject(unreachable=True), NOW, SETTINGS) == Cancel("unreachable")


def test_at_most_one_a_local_day_and_the_weekly_cap() -> None:
    earlier_today = NOW - timedelta(hours=3)
    answered = {"last_message_at": NOW - timedelta(hours=1)}
    one_today = subject(
        sent_this_week=(earlier_today,),
        last_sent_at=earlier_today,
        planned_at=NOW - timedelta(minutes=30),
        **answered,
    )
    assert decide(one_today, NOW, SETTINGS) == Postpone(datetime(2026, 3, 7, 9, 0, tzinfo=UTC), "one_a_day")
    week = tuple(NOW - timedelta(days=d) for d in (6, 4, 2))
    capped = subject(
        sent_this_week=week, last_sent_at=week[-1], planned_at=NOW - timedelta(minutes=30), **answered
    )
    assert decide(capped, NOW, SETTINGS) == Postpone(week[0] + timedelta(days=7), "weekly_cap")


def test_quiet_hours_wrap_past_midnight() -> None:
    at = datetime(2026, 3, 6, 23, 30)
    assert in_quiet_hours(at, 22, 9) and in_quiet_hours(at.replace(hour=8), 22, 9)
    assert not in_quiet_hours(at.replace(hour=9), 22, 9) and not in_quiet_hours(at, 0, 0)
    assert in_quiet_hours(at.replace(hour=13), 12, 14)
