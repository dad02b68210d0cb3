"""What an operator charts, read from what the tables keep: backlogs now, and activity over days.

Nothing here is written for the charts' sake: the inbox, the post-processing queue, touchpoints, day
segments, the transcript, the context snapshots (`generated_prompts`) and their daily roll-up
(`turn_days`), the usage counters and the bot-wide daily counters already hold it. A "day" is a UTC
day. Read-only; never commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import (
    QUEUED,
    Conversation,
    DailyCount,
    DaySegment,
    GeneratedPrompt,
    InboxUpdate,
    ModelUsage,
    Touchpoint,
    TranscriptMessage,
    TurnDay,
    User,
)
from db.repositories.touchpoints import OPEN
from db.repositories.usage import COUNTS, UsageRow

# Inbox rows still to be answered: waiting for a worker, or their reply still being sent.
UNANSWERED = ("pending", "replying")


@dataclass(frozen=True)
class Backlog:
    """What waits now: inbox rows by status, the oldest of them, and each job's oldest due work."""

    inbox: dict[str, int]
    oldest_waiting: datetime | None
    due_since: dict[str, datetime]


@dataclass(frozen=True)
class Lag:
    """One piece of background work: the UTC day it was done, and how long after it was due."""

    day: date
    job: str
    seconds: float


def utc_day(column: Any, dialect: str) -> ColumnElement[str]:
    """`YYYY-MM-DD` of a stored time's UTC day (SQLite keeps UTC times as naive ISO text)."""
    if dialect == "postgresql":
        return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")
    return func.substr(column, 1, 10)


class OperationsRepository:
    """Backlogs and per-day activity, read-only."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.dialect = session.get_bind().dialect.name

    async def backlog(self, now: datetime) -> Backlog:
        """Inbox rows still to answer and the oldest one; the oldest due item of each job."""
        rows = await self.session.execute(
            select(InboxUpdate.status, func.count(), func.min(InboxUpdate.received_at))
            .where(InboxUpdate.status.in_(UNANSWERED))
            .group_by(InboxUpdate.status)
        )
        inbox = dict.fromkeys(UNANSWERED, 0)
        oldest: datetime | None = None
        for status, count, received in rows:
            inbox[status] = int(count)
            at = _aware(received)
            if at is not None and (oldest is None or at < oldest):
                oldest = at
        postprocess = select(
            func.min(func.coalesce(Conversation.next_attempt_at, Conversation.ended_at))
        ).where(
            Conversation.status == QUEUED,
            or_(Conversation.next_attempt_at.is_(None), Conversation.next_attempt_at <= now),
        )
        touchpoints = select(func.min(Touchpoint.due_at)).where(
            Touchpoint.status.in_(OPEN), Touchpoint.due_at <= now
        )
        summaries = select(func.min(DaySegment.last_message_at)).where(
            DaySegment.summary_due.is_(True), DaySegment.status == "open"
        )
        due: dict[str, datetime] = {}
        for job, query in (
            ("postprocess", postprocess),
            ("touchpoints", touchpoints),
            ("day-summaries", summaries),
        ):
            if (since := _aware(await self.session.scalar(query))) is not None:
                due[job] = since
        return Backlog(inbox, oldest, due)

    async def active(self, since: datetime) -> list[tuple[str, str, int]]:
        """(day, owner kind "person" | "group", owners who wrote) for each UTC day from `since`."""
        day = utc_day(TranscriptMessage.sent_at, self.dialect)
        rows = await self.session.execute(
            select(day, User.kind, func.count(func.distinct(TranscriptMessage.user_id)))
            .join(User, User.id == TranscriptMessage.user_id)
            .where(TranscriptMessage.role == "user", TranscriptMessage.sent_at >= since)
            .group_by(day, User.kind)
        )
        return [(str(d), str(kind), int(n)) for d, kind, n in rows]

    async def turns(self, since: datetime) -> list[tuple[str, float | None]]:
        """(day, ms from the turn's start to its answer, when recorded) of each answered turn."""
        day = utc_day(GeneratedPrompt.created_at, self.dialect)
        answered = GeneratedPrompt.context_snapshot["answered_ms"].as_float()
        rows = await self.session.execute(select(day, answered).where(GeneratedPrompt.created_at >= since))
        return [(str(d), None if ms is None else float(ms)) for d, ms in rows]

    async def rolled_turns(self, first: date) -> list[tuple[date, int, float | None]]:
        """(day, answered turns, p95 ms) of the days from `first` on that the roll-up holds."""
        rows = await self.session.execute(
            select(TurnDay.day, TurnDay.turns, TurnDay.p95_ms).where(TurnDay.day >= first)
        )
        return [(day, int(turns), p95) for day, turns, p95 in rows]

    async def usage(self, since: date) -> list[UsageRow]:
        """Every user's usage counters from `since` on, summed per day and kind."""
        rows = await self.session.execute(
            select(ModelUsage.day, ModelUsage.kind, *(func.sum(getattr(ModelUsage, c)) for c in COUNTS))
            .where(ModelUsage.day >= since)
            .group_by(ModelUsage.day, ModelUsage.kind)
        )
        return [UsageRow(d, kind, *(int(n or 0) for n in values)) for d, kind, *values in rows]

    async def daily_counts(self, since: date) -> list[tuple[date, str, int]]:
        """The bot-wide counters (refusals and the day's tokens) of each day from `since` on."""
        rows = await self.session.execute(
            select(DailyCount.day, DailyCount.name, DailyCount.count).where(DailyCount.day >= since)
        )
        return [(d, name, int(n)) for d, name, n in rows]

    async def lags(self, since: datetime) -> list[Lag]:
        """How long after they were due conversations were post-processed and touchpoints sent."""
        lags: list[Lag] = []
        processed = await self.session.execute(
            select(Conversation.processed_at, Conversation.ended_at).where(
                Conversation.processed_at >= since, Conversation.ended_at.is_not(None)
            )
        )
        for done, due in processed:
            lags.append(_lag("postprocess", done, due))
        sent = await self.session.execute(
            select(Touchpoint.sent_at, Touchpoint.due_at, Touchpoint.kind).where(Touchpoint.sent_at >= since)
        )
        for done, due, kind in sent:
            lags.append(_lag("reminders" if kind == "reminder" else "touchpoints", done, due))
        return lags


def _aware(value: datetime | None) -> datetime | None:
    """Aggregates bypass the column type: SQLite hands back naive UTC, or even text."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _lag(job: str, done: datetime | None, due: datetime | None) -> Lag:
    done_at, due_at = _aware(done), _aware(due)
    assert done_at is not None and due_at is not None
    return Lag(done_at.date(), job, max((done_at - due_at).total_seconds(), 0.0))
