"""Three UTC days of a bot's life for the dashboard: who wrote, answered turns with their times,
usage with the prompt cache, refusals, post-processing and touchpoints done late, and a backlog now.

Rows are written as the tables hold them; the figures the dashboard must show follow from the
constants here (the tests compute them, the dashboard reads the rows).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.access import REFUSED, STRANGERS
from db.inbox import InboxRepository, NewUpdate
from db.models import (
    Conversation,
    DailyCount,
    GeneratedPrompt,
    ModelUsage,
    Touchpoint,
    TranscriptMessage,
    User,
)

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
DAY0, DAY1, DAY2 = (NOW.date() - timedelta(days=d) for d in (2, 1, 0))
# ms from a turn's start to its answer, per day (DAY0's one turn predates the measure).
ANSWERED_MS = {DAY1: [100.0 * i for i in range(1, 21)], DAY2: [500.0, 700.0]}
# (input, cache read, cache write, output) of the chat's usage per day.
USAGE = {DAY1: (100_000, 80_000, 10_000, 2_000), DAY2: (20_000, 0, 0, 500)}
POSTPROCESS_LAGS = [120, 600]  # seconds, on DAY1
FOLLOW_UP_LAG, REMINDER_LAG = 300, 30  # seconds, on DAY1 and DAY2
ADMIN_TELEGRAM_ID = 999


def _at(day: object, hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC).replace(  # type: ignore[call-overload]
        hour=hour, minute=minute, second=second
    )


async def seed_dashboard(sessions: async_sessionmaker[AsyncSession]) -> dict[str, int]:
    """Write the rows; returns the users' ids by name."""
    async with sessions() as session, session.begin():
        people = [
            User(key=f"telegram:{t}", telegram_id=t, name=n, created_at=NOW - timedelta(days=9))
            for t, n in ((501, "Pia"), (502, "Quinn"))
        ]
        group = User(
            key="group:-100501", telegram_id=-100501, kind="group", created_at=NOW - timedelta(days=9)
        )
        session.add_all([*people, group])
        await session.flush()
        pia, quinn = people
        wrote = [(pia, DAY0), (pia, DAY1), (pia, DAY2), (quinn, DAY1), (group, DAY1), (pia, DAY1)]
        for who, day in wrote:
            session.add(TranscriptMessage(user_id=who.id, role="user", content="hi", sent_at=_at(day, 8)))
        session.add(
            TranscriptMessage(user_id=quinn.id, role="assistant", content="hey", sent_at=_at(DAY0, 8))
        )
        session.add(
            GeneratedPrompt(user_id=pia.id, context_snapshot={"total_tokens": 10}, created_at=_at(DAY0, 8))
        )
        for day, times in ANSWERED_MS.items():
            for ms in times:
                snapshot = {"total_tokens": 10, "answered_ms": ms}
                session.add(
                    GeneratedPrompt(user_id=pia.id, context_snapshot=snapshot, created_at=_at(day, 8, 1))
                )
        for day, (tokens_in, read, written, tokens_out) in USAGE.items():
            session.add(
                ModelUsage(
                    user_id=pia.id,
                    day=day,
                    kind="chat",
                    calls=10,
                    input_tokens=tokens_in,
                    output_tokens=tokens_out,
                    cache_read_tokens=read,
                    cache_write_tokens=written,
                    cache_write_1h_tokens=0,
                )
            )
        session.add_all(
            [
                DailyCount(day=DAY1, name="budget_user", count=2),
                DailyCount(day=DAY1, name=STRANGERS, count=3),
                DailyCount(day=DAY1, name="rate_message_minute", count=4),
                DailyCount(day=DAY2, name="rate_message_minute", count=1),
                DailyCount(day=DAY2, name="rate_export_day", count=5),
                DailyCount(day=DAY0, name=REFUSED, count=1),
            ]
        )
        for n, lag in enumerate(POSTPROCESS_LAGS):
            ended = _at(DAY1, 10 + n)
            session.add(
                Conversation(
                    user_id=quinn.id,
                    status="processed",
                    started_at=ended - timedelta(minutes=5),
                    last_message_at=ended,
                    ended_at=ended,
                    processed_at=ended + timedelta(seconds=lag),
                )
            )
        # Waiting now: a conversation closed five minutes ago, not post-processed yet.
        session.add(
            Conversation(
                user_id=pia.id,
                status="closed",
                started_at=NOW - timedelta(minutes=20),
                last_message_at=NOW - timedelta(minutes=5),
                ended_at=NOW - timedelta(minutes=5),
            )
        )
        for kind, day, lag in (("follow_up", DAY1, FOLLOW_UP_LAG), ("reminder", DAY2, REMINDER_LAG)):
            due = _at(day, 7)
            session.add(
                Touchpoint(
                    user_id=pia.id,
                    kind=kind,
                    reason="r",
                    due_at=due,
                    timezone="UTC",
                    status="sent",
                    dedupe_key=f"{kind}-{day}",
                    planned_at=due - timedelta(days=1),
                    sent_at=due + timedelta(seconds=lag),
                )
            )
        update = {"update_id": 9, "message": {"chat": {"id": 501}, "text": "still waiting"}}
        await InboxRepository(session).add([NewUpdate(9, 501, 501, update)], now=NOW - timedelta(seconds=60))
    return {"pia": pia.id, "quinn": quinn.id, "group": group.id}
