"""Plans: the extraction's proposed follow-up moments become touchpoints due at a UTC instant.

The extractor names a local time ("2026-11-27 15:00") in the user's zone; it is resolved here with
the zone the user had when the conversation ended, so "Friday afternoon" means their Friday.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent.core.clock import ensure_utc, zone_of
from agent.digest.extraction import NewThread
from db.repositories.dedupe import dedupe_key

# A plan further ahead than this is a misreading, not a follow-up.
MAX_AHEAD = timedelta(days=60)
_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")


@dataclass(frozen=True)
class Plan:
    """One follow-up to store: the thread it comes from (by its key), why, and when (UTC)."""

    thread_key: str
    reason: str
    due_at: datetime
    dedupe_key: str


def resolve_due(text: str | None, timezone: str, *, after: datetime) -> datetime | None:
    """The UTC instant of a local "YYYY-MM-DD HH:MM" in `timezone`; None when unreadable, not after
    `after`, or too far ahead."""
    if not text:
        return None
    for fmt in _FORMATS:
        try:
            naive = datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
        due = ensure_utc(naive.replace(tzinfo=zone_of(timezone)))
        return due if after < due <= after + MAX_AHEAD else None
    return None


def thread_key(conversation_id: int, kind: str, content: str) -> str:
    """The dedupe key ThreadRepository gives a thread opened from a conversation."""
    return dedupe_key("thread", conversation_id, kind, content)


def plans_from(
    threads: Sequence[NewThread], *, conversation_id: int, timezone: str, after: datetime
) -> list[Plan]:
    """The follow-ups the extraction proposed on new threads, resolved to UTC; others are left out."""
    plans: list[Plan] = []
    for thread in threads:
        due = resolve_due(thread.follow_up_at, timezone, after=after)
        if due is None or not thread.content.strip():
            continue
        key = thread_key(conversation_id, thread.type, thread.content)
        plans.append(Plan(key, thread.content.strip(), due, dedupe_key("touchpoint", key)))
    return plans
