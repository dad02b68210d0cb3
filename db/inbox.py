"""The inbox table's statements: store updates, lease the head of each sender's queue, finish rows.

The caller owns the transaction. Leasing is one statement on both databases: PostgreSQL locks the
chosen rows with `FOR UPDATE SKIP LOCKED` (two instances never take the same row, and neither
waits for the other); SQLite runs one writer at a time, so the same statement is atomic there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, case, delete, exists, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from db.models import InboxUpdate, User

OPEN = ("pending", "replying")
# Claiming a row whose reply was recorded but not finished: it may have reached Telegram already.
_RESUMING = case((InboxUpdate.status == "replying", 1), else_=0)


@dataclass(frozen=True)
class NewUpdate:
    """An update as received: its id, sender and chat (None when it has none) and the raw JSON."""

    update_id: int
    telegram_user_id: int | None
    chat_id: int | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class LeasedUpdate:
    """A row this worker holds: what to process, or the reply still to send."""

    id: int
    update_id: int
    telegram_user_id: int | None
    chat_id: int | None
    payload: dict[str, Any] | None
    status: str
    reply_text: str | None
    reply_chunks_sent: int
    attempts: int


class InboxRepository:
    """Statements on `inbox_updates`; every write of a leased row checks the lease where it matters."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, updates: Sequence[NewUpdate], *, now: datetime) -> int:
        """Insert updates not seen before (a repeated update_id is ignored); return how many were new.

        Updates without a sender have nothing to answer: they are stored done, without their JSON.
        """
        if not updates:
            return 0
        rows = [
            {
                "update_id": u.update_id,
                "telegram_user_id": u.telegram_user_id,
                "chat_id": u.chat_id,
                "payload": u.payload if u.telegram_user_id is not None else None,
                "status": "pending" if u.telegram_user_id is not None else "done",
                "outcome": None if u.telegram_user_id is not None else "ignored",
                "received_at": now,
                "available_at": now,
                "done_at": None if u.telegram_user_id is not None else now,
                "attempts": 0,
                "reply_chunks_sent": 0,
                "resumed_sends": 0,
            }
            for u in updates
        ]
        dialect = postgresql if self.session.get_bind().dialect.name == "postgresql" else sqlite
        stmt = (
            dialect.insert(InboxUpdate)
            .values(rows)
            .on_conflict_do_nothing(index_elements=["update_id"])
            .returning(InboxUpdate.id)
        )
        return len((await self.session.execute(stmt)).all())

    def _claimable(self, now: datetime, limit: int) -> Select[int]:
        # The head of each sender's queue: no earlier open row, and no open row of theirs leased now
        # (rows can commit out of update_id order; a sender never has two rows in flight).
        other = aliased(InboxUpdate)
        busy_or_earlier = exists().where(
            other.telegram_user_id == InboxUpdate.telegram_user_id,
            other.status.in_(OPEN),
            other.id != InboxUpdate.id,
            or_(other.update_id < InboxUpdate.update_id, other.lease_expires_at >= now),
        )
        return (
            select(InboxUpdate.id)
            .where(
                InboxUpdate.status.in_(OPEN),
                InboxUpdate.available_at <= now,
                or_(InboxUpdate.lease_expires_at.is_(None), InboxUpdate.lease_expires_at < now),
                ~busy_or_earlier,
            )
            .order_by(InboxUpdate.update_id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )

    async def claim(self, *, owner: str, now: datetime, lease: timedelta, limit: int) -> list[LeasedUpdate]:
        """Lease up to `limit` claimable rows, oldest first, at most one per sender."""
        if limit <= 0:
            return []
        stmt = (
            update(InboxUpdate)
            .where(InboxUpdate.id.in_(self._claimable(now, limit).scalar_subquery()))
            .values(
                lease_owner=owner,
                lease_expires_at=now + lease,
                attempts=InboxUpdate.attempts + 1,
                resumed_sends=InboxUpdate.resumed_sends + _RESUMING,
            )
            .returning(
                InboxUpdate.id,
                InboxUpdate.update_id,
                InboxUpdate.telegram_user_id,
                InboxUpdate.chat_id,
                InboxUpdate.payload,
                InboxUpdate.status,
                InboxUpdate.reply_text,
                InboxUpdate.reply_chunks_sent,
                InboxUpdate.attempts,
            )
            .execution_options(synchronize_session=False)
        )
        rows = (await self.session.execute(stmt)).all()
        return sorted((LeasedUpdate(*row) for row in rows), key=lambda row: row.update_id)

    async def renew(self, *, owner: str, now: datetime, lease: timedelta) -> set[int]:
        """Extend every lease the owner holds; return the ids still held."""
        stmt = (
            update(InboxUpdate)
            .where(InboxUpdate.lease_owner == owner, InboxUpdate.status.in_(OPEN))
            .values(lease_expires_at=now + lease)
            .returning(InboxUpdate.id)
            .execution_options(synchronize_session=False)
        )
        return set((await self.session.execute(stmt)).scalars())

    async def record_reply(self, row_id: int, *, owner: str, text: str) -> bool:
        """Inside the turn's transaction: the reply to send; False when the row is no longer ours."""
        stmt = (
            update(InboxUpdate)
            .where(
                InboxUpdate.id == row_id, InboxUpdate.lease_owner == owner, InboxUpdate.status == "pending"
            )
            .values(status="replying", reply_text=text, reply_chunks_sent=0, user_id=self._sender_user())
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(await self.session.execute(stmt), "rowcount", 0))

    async def chunk_sent(self, row_id: int, *, sent: int) -> None:
        """Telegram accepted the first `sent` chunks of the recorded reply."""
        stmt = (
            update(InboxUpdate)
            .where(InboxUpdate.id == row_id, InboxUpdate.status == "replying")
            .values(reply_chunks_sent=sent)
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(stmt)

    async def finish(
        self, row_id: int, *, now: datetime, outcome: str, sent: int = 0, error: str | None = None
    ) -> bool:
        """Mark a row done and drop its text (payload and reply); False when it was done or deleted."""
        stmt = (
            update(InboxUpdate)
            .where(InboxUpdate.id == row_id, InboxUpdate.status != "done")
            .values(
                status="done",
                outcome=outcome,
                done_at=now,
                payload=None,
                reply_text=None,
                reply_chunks_sent=sent,
                lease_owner=None,
                lease_expires_at=None,
                last_error=error,
                user_id=func.coalesce(InboxUpdate.user_id, self._sender_user()),
            )
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(await self.session.execute(stmt), "rowcount", 0))

    async def release(self, row_id: int, *, owner: str, available_at: datetime, error: str | None) -> None:
        """Give a row back, to be tried again from `available_at`."""
        stmt = (
            update(InboxUpdate)
            .where(InboxUpdate.id == row_id, InboxUpdate.lease_owner == owner, InboxUpdate.status != "done")
            .values(lease_owner=None, lease_expires_at=None, available_at=available_at, last_error=error)
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(stmt)

    async def release_all(self, *, owner: str | None = None) -> int:
        """Drop the leases of one owner (a graceful stop), or every lease (a single process starting)."""
        stmt = update(InboxUpdate).where(InboxUpdate.status.in_(OPEN), InboxUpdate.lease_owner.is_not(None))
        if owner is not None:
            stmt = stmt.where(InboxUpdate.lease_owner == owner)
        stmt = stmt.values(lease_owner=None, lease_expires_at=None).execution_options(
            synchronize_session=False
        )
        return int(getattr(await self.session.execute(stmt), "rowcount", 0) or 0)

    async def prune(self, *, done_before: datetime, limit: int = 5000) -> int:
        """Delete done rows finished before the cut-off (a batch at a time)."""
        old = (
            select(InboxUpdate.id)
            .where(InboxUpdate.status == "done", InboxUpdate.done_at < done_before)
            .limit(limit)
        )
        stmt = delete(InboxUpdate).where(InboxUpdate.id.in_(old.scalar_subquery()))
        return int(getattr(await self.session.execute(stmt), "rowcount", 0) or 0)

    async def forget_sender(self, telegram_user_id: int, *, current_update_id: int | None = None) -> int:
        """Delete a sender's finished rows and the one being worked (/forget); rows still waiting are
        messages sent after the /forget, which stay."""
        stmt = delete(InboxUpdate).where(
            InboxUpdate.telegram_user_id == telegram_user_id,
            or_(InboxUpdate.status == "done", InboxUpdate.update_id == current_update_id),
        )
        return int(getattr(await self.session.execute(stmt), "rowcount", 0) or 0)

    async def counts(self) -> dict[str, int]:
        """Rows by status (for /tasks/inbox and the admin's view)."""
        stmt = select(InboxUpdate.status, func.count()).group_by(InboxUpdate.status)
        return {status: int(n) for status, n in (await self.session.execute(stmt)).all()}

    @staticmethod
    def _sender_user() -> Any:
        return (
            select(User.id)
            .where(User.telegram_id == InboxUpdate.telegram_user_id)
            .scalar_subquery()
            .correlate(InboxUpdate)
        )
