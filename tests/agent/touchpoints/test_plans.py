"""Follow-up plans: the extractor's local times resolve to UTC in the user's zone, or to nothing."""

from __future__ import annotations

from datetime import UTC, datetime

from agent.core.clock import local_label
from agent.digest.extraction import NewThread
from agent.touchpoints.plans import plans_from, resolve_due

AFTER = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)  # a Tuesday


def test_a_local_time_resolves_in_the_users_zone() -> None:
    paris = resolve_due("2026-03-06 15:00", "Europe/Paris", after=AFTER)
    assert paris == datetime(2026, 3, 6, 14, 0, tzinfo=UTC)
    assert resolve_due("2026-03-06T15:00", "America/New_York", after=AFTER) == datetime(
        2026, 3, 6, 20, 0, tzinfo=UTC
    )


def test_unreadable_past_and_far_times_plan_nothing() -> None:
    assert resolve_due("Friday afternoon", "UTC", after=AFTER) is None
    assert resolve_due("2026-03-02 15:00", "UTC", after=AFTER) is None
    assert resolve_due("2027-03-02 15:00", "UTC", after=AFTER) is None
    assert resolve_due(None, "UTC", after=AFTER) is None


def test_only_threads_with_a_moment_become_plans() -> None:
    threads = [
        NewThread(type="follow_up", content="Ana's interview on Thursday", follow_up_at="2026-03-06 15:00"),
        NewThread(type="topic", content="Ana likes jazz"),
    ]
    plans = plans_from(threads, conversation_id=7, timezone="Asia/Tokyo", after=AFTER)
    assert [(p.reason, p.due_at) for p in plans] == [
        ("Ana's interview on Thursday", datetime(2026, 3, 6, 6, 0, tzinfo=UTC))
    ]
    again = plans_from(threads, conversation_id=7, timezone="Asia/Tokyo", after=AFTER)
    assert (
        again[0].dedupe_key
        == plans[0].dedupe_key
        != plans_from(threads, conversation_id=8, timezone="Asia/Tokyo", after=AFTER)[0].dedupe_key
    )


def test_the_label_reads_as_local_time() -> None:
    assert local_label(AFTER, "Europe/Paris") == "Tuesday 2026-03-03 10:00 (Europe/Paris)"
