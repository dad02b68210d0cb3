"""The touchpoints table's statements: plan, lease the due ones, record, send and finish them.

Finding who is due is one statement on the `(status, due_at)` index: open rows whose time has come
and whose lease is free are leased to one worker by the work queue's claim (db/work.py: two
instances never take the same row and neither waits). A row's text is recorded with its transcript
row before anything is sent (`sending`), so a crash after the model call resumes the send and never
composes or sends it twice. The caller owns the transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Integer, Select, bindparam, delete, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db import work
from db.models import TOUCHPOINT_KIND, Conversation, ConversationThread, Touchpoint, TranscriptMessage, User
from db.work import Retry

OPEN = ("planned", "sending")
# The kind of a reminder's occurrence (agent/reminders/): the rules that keep touchpoints welcome and the
# reports leave it out.
REMINDER = "reminder"
FINAL = ("sent", "declined", "cancelled", "undeliverable")


@dataclass(frozen=True)
class NewTouchpoint:
    """A plan to store: the thread (by its dedupe key) it follows up, why, and when (UTC)."""

    thread_key: str | None
    reason: str
    due_at: datetime
    dedupe_key: str
    kind: str = "follow_up"


@dataclass(frozen=True)
class TouchpointStats:
    """Counts since a moment, for admin /stats."""

    planned: int
    sent: int
    declined: int
    cancelled: int
    answered_within_day: int


@functools.cache
def _planned_for() -> Select[Touchpoint]:
    # Built once: every turn's context reads it, and building it cost more than running it.
    return (
        select(Touchpoint)
        .where(
            Touchpoint.user_id == bindparam("user_id"),
            Touchpoint.kind != REMINDER,
            Touchpoint.status == "planned",
        )
        .order_by(Touchpoint.due_at, Touchpoint.id)
        .limit(bindparam("limit", type_=Integer))
    )


_RENEW = work.renewal(Touchpoint, Touchpoint.id, Touchpoint.lease_holder, Touchpoint.lease_expires_at)


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


class TouchpointRepository:
    """Statements on `touchpoints`; writes of a leased row check the lease."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.postgres = session.get_bind().dialect.name == "postgresql"

    async def plan(
        self,
        user_id: int,
        conversation_id: int | None,
        timezone: str,
        plans: Sequence[NewTouchpoint],
        *,
        at: datetime,
    ) -> int:
        """Store plans not stored before (the idempotency key); return how many were new.

        A group chat gets no follow-ups or check-ins: the bot never writes first into a group, so
        nothing is planned for a group's owner row (a reminder set in a group is planned by
        agent/reminders, and goes to the group).
        """
        if not plans:
            return 0
        if await self.session.scalar(select(User.kind).where(User.id == user_id)) == "group":
            return 0
        keys = [p.thread_key for p in plans if p.thread_key]
        threads: dict[str, int] = {}
        if keys:
            rows = await self.session.execute(
                select(ConversationThread.dedupe_key, ConversationThread.id).where(
                    ConversationThread.user_id == user_id, ConversationThread.dedupe_key.in_(keys)
                )
            )
            threads = {key: thread_id for key, thread_id in rows.all()}
        values = [
            {
                "user_id": user_id,
                "thread_id": threads.get(p.thread_key) if p.thread_key else None,
                "conversation_id": conversation_id,
                "kind": p.kind,
                "reason": p.reason,
                "due_at": p.due_at,
                "timezone": timezone,
                "status": "planned",
                "dedupe_key": p.dedupe_key,
                "planned_at": at,
                "attempts": 0,
                "chunks_sent": 0,
            }
            for p in {p.dedupe_key: p for p in plans}.values()
        ]
        insert = postgresql.insert if self.postgres else sqlite.insert
        stmt = insert(Touchpoint).values(values)
        stmt = stmt.on_conflict_do_nothing(index_elements=["user_id", "dedupe_key"])
        return _rowcount(await self.session.execute(stmt))

    @staticmethod
    def due_query(now: datetime, limit: int) -> Select[int]:
        """Ids of due rows whose lease is free, oldest due first (a range of the status/due index)."""
        return (
            select(Touchpoint.id)
            .where(
                Touchpoint.status.in_(OPEN),
                Touchpoint.due_at <= now,
                or_(Touchpoint.lease_expires_at.is_(None), Touchpoint.lease_expires_at < now),
            )
            .order_by(Touchpoint.due_at)
            .limit(limit)
        )

    async def lease_due(self, *, holder: str, now: datetime, lease: timedelta, limit: int) -> list[int]:
        """Lease up to `limit` due rows (oldest due first) whose lease is free; their ids."""
        values = {
            Touchpoint.lease_holder: holder,
            Touchpoint.lease_expires_at: now + lease,
            Touchpoint.attempts: Touchpoint.attempts + 1,
        }
        due, returning = self.due_query(now, limit), [Touchpoint.id, Touchpoint.due_at]
        stmt = work.claim(Touchpoint, Touchpoint.id, due, values=values, returning=returning, many=True)
        rows = (await self.session.execute(stmt)).all()
        return [row_id for row_id, _ in sorted(rows, key=lambda row: (row[1], row[0]))]

    async def held(self, touchpoint_id: int, holder: str) -> Touchpoint | None:
        """The row while `holder` holds its lease, else None."""
        row = await self.session.get(Touchpoint, touchpoint_id, populate_existing=True)
        return row if row is not None and row.lease_holder == holder and row.status in OPEN else None

    async def _leased_update(self, touchpoint_id: int, holder: str, **values: Any) -> bool:
        stmt = (
            update(Touchpoint)
            .where(
                Touchpoint.id == touchpoint_id,
                Touchpoint.lease_holder == holder,
                Touchpoint.status.in_(OPEN),
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        return bool(_rowcount(await self.session.execute(stmt)))

    async def renew(self, touchpoint_id: int, holder: str, until: datetime) -> bool:
        """Extend `holder`'s lease on the row to `until`; False when the lease was lost."""
        params = {"holder": holder, "keys": [touchpoint_id], "until": until}
        return bool((await self.session.execute(_RENEW, params)).all())

    async def retry_later(
        self, touchpoint_id: int, holder: str, *, now: datetime, error: str, retry: Retry
    ) -> None:
        """Give the row back, to be leased again after its backoff (a sending row resumes its send)."""
        row = await self.held(touchpoint_id, holder)
        if row is None:
            return
        row.lease_holder, row.lease_expires_at = None, now + retry.after(row.attempts)
        row.last_error = error[:2000]

    async def hold(self, touchpoint_id: int, holder: str) -> tuple[Touchpoint, User] | None:
        """The row while `holder` holds its lease, and its person's row locked until the commit (what
        two instances writing first to one person wait on); None when the lease is lost."""
        row = await self.held(touchpoint_id, holder)
        if row is None:
            return None
        user = await self.session.get(User, row.user_id, with_for_update=True, populate_existing=True)
        return None if user is None else (row, user)

    async def undeliverable(self, touchpoint_id: int, holder: str, user_id: int, *, now: datetime) -> None:
        """Telegram refused the chat: the user is marked unreachable (skipped until they write again),
        the row closes as blocked, and an unsent message leaves no trace in their transcript."""
        row = await self.session.get(Touchpoint, touchpoint_id)
        if row is None or row.lease_holder != holder:
            return
        await self.session.execute(update(User).where(User.id == user_id).values(unreachable_at=now))
        if row.chunks_sent == 0 and row.transcript_message_id is not None:
            message_id = row.transcript_message_id
            conversation_id = await self.session.scalar(
                select(TranscriptMessage.conversation_id).where(TranscriptMessage.id == message_id)
            )
            await self.session.execute(delete(TranscriptMessage).where(TranscriptMessage.id == message_id))
            if conversation_id is not None:
                await self.session.execute(
                    delete(Conversation).where(
                        Conversation.id == conversation_id, Conversation.kind == TOUCHPOINT_KIND
                    )
                )
        row.status, row.outcome, row.finished_at = "undeliverable", "blocked", now
        row.lease_holder, row.lease_expires_at = None, None

    async def thread_open(self, thread_id: int | None) -> bool:
        """Whether the thread a follow-up is about is still open (True without a thread)."""
        if thread_id is None:
            return True
        status = await self.session.scalar(
            select(ConversationThread.status).where(ConversationThread.id == thread_id)
        )
        return status in (None, "open")

    async def postpone(self, touchpoint_id: int, holder: str, due_at: datetime) -> bool:
        """Give the row back, due again at `due_at` (quiet hours, the daily or weekly cap)."""
        return await self._leased_update(
            touchpoint_id, holder, due_at=due_at, lease_holder=None, lease_expires_at=None
        )

    async def close(
        self, touchpoint_id: int, holder: str, *, status: str, outcome: str | None, now: datetime
    ) -> bool:
        """Finish a planned row without sending: declined, cancelled (outcome says why) or undeliverable."""
        assert status in FINAL
        return await self._leased_update(
            touchpoint_id,
            holder,
            status=status,
            outcome=outcome,
            finished_at=now,
            lease_holder=None,
            lease_expires_at=None,
        )

    async def record(
        self, touchpoint_id: int, holder: str, *, text: str, transcript_message_id: int, now: datetime
    ) -> bool:
        """The composed text, in the transaction that stores its transcript row: it must be sent now."""
        return await self._leased_update(
            touchpoint_id,
            holder,
            status="sending",
            text=text,
            transcript_message_id=transcript_message_id,
            chunks_sent=0,
            sent_at=now,
        )

    async def chunk_sent(self, touchpoint_id: int, holder: str, *, sent: int) -> bool:
        """Telegram accepted the first `sent` chunks."""
        return await self._leased_update(touchpoint_id, holder, chunks_sent=sent)

    async def mark_sent(self, touchpoint_id: int, holder: str, *, sent: int, now: datetime) -> bool:
        """Every chunk is with Telegram: done."""
        return await self._leased_update(
            touchpoint_id,
            holder,
            status="sent",
            outcome="sent",
            chunks_sent=sent,
            finished_at=now,
            lease_holder=None,
            lease_expires_at=None,
        )

    async def sent_since(self, user_id: int, since: datetime) -> list[datetime]:
        """When the user's touchpoints since `since` were sent (or are being sent)."""
        stmt = select(Touchpoint.sent_at).where(
            Touchpoint.user_id == user_id,
            Touchpoint.kind != REMINDER,
            Touchpoint.status.in_(("sending", "sent")),
            Touchpoint.sent_at >= since,
        )
        return sorted(at for at in (await self.session.execute(stmt)).scalars() if at is not None)

    async def last_sent_at(self, user_id: int) -> datetime | None:
        """The newest touchpoint's send time, ever."""
        stmt = select(func.max(Touchpoint.sent_at)).where(
            Touchpoint.user_id == user_id,
            Touchpoint.kind != REMINDER,
            Touchpoint.status.in_(("sending", "sent")),
        )
        return await self.session.scalar(stmt)

    async def planned_for(self, user_id: int, *, limit: int = 10) -> Sequence[Touchpoint]:
        """The user's planned touchpoints other than reminders, soonest first (/memory)."""
        params = {"user_id": user_id, "limit": limit}
        return (await self.session.execute(_planned_for(), params)).scalars().all()

    async def cancel_planned(self, user_id: int, *, outcome: str, now: datetime) -> int:
        """Cancel every planned (not leased) row of the user (/followups off)."""
        stmt = (
            update(Touchpoint)
            .where(Touchpoint.user_id == user_id, Touchpoint.kind != REMINDER, Touchpoint.status == "planned")
            .values(status="cancelled", outcome=outcome, finished_at=now)
            .execution_options(synchronize_session=False)
        )
        return _rowcount(await self.session.execute(stmt))

    async def stats(self, since: datetime) -> TouchpointStats:
        """Planned (open now), and since `since`: sent, declined, cancelled, answered within 24 h."""
        counts = dict(
            (
                await self.session.execute(
                    select(Touchpoint.status, func.count())
                    .where(
                        Touchpoint.kind != REMINDER,
                        or_(Touchpoint.status == "planned", Touchpoint.finished_at >= since),
                    )
                    .group_by(Touchpoint.status)
                )
            ).all()
        )
        answer = (
            select(func.min(TranscriptMessage.sent_at))
            .where(
                TranscriptMessage.user_id == Touchpoint.user_id,
                TranscriptMessage.role == "user",
                TranscriptMessage.sent_at > Touchpoint.sent_at,
            )
            .correlate(Touchpoint)
            .scalar_subquery()
        )
        sent = (
            await self.session.execute(
                select(Touchpoint.sent_at, answer).where(
                    Touchpoint.kind != REMINDER, Touchpoint.status == "sent", Touchpoint.finished_at >= since
                )
            )
        ).all()
        day = timedelta(hours=24)
        answered = sum(1 for at, reply in sent if at is not None and reply is not None and reply - at <= day)
        return TouchpointStats(
            planned=int(counts.get("planned", 0)),
            sent=int(counts.get("sent", 0)),
            declined=int(counts.get("declined", 0)),
            cancelled=int(counts.get("cancelled", 0)),
            answered_within_day=answered,
        )
