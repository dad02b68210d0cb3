"""Open-thread ranking for the "Unfinished topics" tier.

score = priority × recency. Priority by thread type: promises and unresolved questions 10,
curiosity 7, callbacks 4. Post-processing writes the types `promise`, `question`, `follow_up`,
`topic`, `curiosity` and `callback`: a question or a follow-up is by nature unresolved (10); a
topic is something to call back to later (4), as is any type we do not know. Recency is 10 for a
thread opened today (the user's calendar day), falling linearly to 1 at 7 days; older threads
keep 1 halved, 0.5. Ties go to the newer thread, then the higher id, so the order is total.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

from agent.core.clock import local_day

PRIORITY: dict[str, int] = {
    "promise": 10,
    "unresolved": 10,
    "question": 10,
    "follow_up": 10,
    "curiosity": 7,
    "callback": 4,
    "topic": 4,
}
DEFAULT_PRIORITY = 4
RECENT_DAYS = 7
STALE_RECENCY = 0.5


@dataclass(frozen=True)
class ThreadRow:
    """The columns of an open thread that ranking and display need."""

    id: int
    type: str
    content: str
    created_at: datetime


@dataclass(frozen=True)
class RankedThread:
    """A thread with its score and its age in days."""

    row: ThreadRow
    score: float
    age_days: int


def priority_of(thread_type: str) -> int:
    """The priority of a thread type."""
    return PRIORITY.get(thread_type, DEFAULT_PRIORITY)


def priority_classes() -> dict[int, list[str]]:
    """Known types grouped by priority (the loader fetches the newest few of each class)."""
    classes: dict[int, list[str]] = {}
    for name, value in PRIORITY.items():
        classes.setdefault(value, []).append(name)
    return classes


def recency(age_days: int) -> float:
    """10 today, 1 at seven days (linear), 0.5 past seven days."""
    if age_days > RECENT_DAYS:
        return STALE_RECENCY
    return 10 - 9 * max(age_days, 0) / RECENT_DAYS


def rank_threads(rows: Iterable[ThreadRow], *, today: date, timezone: str, limit: int) -> list[RankedThread]:
    """The best `limit` threads, best first, deterministically."""
    ranked = []
    for row in rows:
        age = (today - local_day(row.created_at, timezone)).days
        ranked.append(RankedThread(row, priority_of(row.type) * recency(age), age))
    ranked.sort(key=lambda t: (-t.score, -t.row.created_at.timestamp(), -t.row.id))
    return ranked[:limit]


def describe_age(age_days: int) -> str:
    """'today', 'yesterday' or 'N days ago'."""
    if age_days <= 0:
        return "today"
    if age_days == 1:
        return "yesterday"
    return f"{age_days} days ago"


def thread_lines(ranked: Sequence[RankedThread]) -> list[str]:
    """One line per thread for the prompt."""
    return [f"- ({t.row.type.replace('_', ' ')}, {describe_age(t.age_days)}) {t.row.content}" for t in ranked]
