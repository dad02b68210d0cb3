"""The inbox table's statements: store updates, lease the head of each conversation's queue, finish rows.

The caller owns the transaction. Leasing is the work queue's claim (db/work.py), one statement on
both databases: two instances never take the same row, and neither waits for the other.

A queue is a conversation (`queue_key`: the update's chat, else its sender): its rows are leased one
at a time, oldest first, so the lease of its head row is what serialises the conversation's turns
across instances; nothing else locks them.

The statements are built once with bound parameters (they run on every message; building them
per call cost more than running them). `relax_durability` marks a transaction whose loss in a
database *server* crash is harmless (a lease, a "sent" mark): PostgreSQL then commits it without
waiting for the disk, which keeps the bookkeeping off the turn's critical path.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    Integer,
    String,
    Table,
    Text,
    bindparam,
    case,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db import work
from db.inbox_rows import LeasedUpdate as LeasedUpdate
from db.inbox_rows import NewUpdate as NewUpdate
from db.models import InboxUpdate, User, UTCDateTime
from db.stops import add_stops, forget_stops

OPEN = ("pending", "replying")

_T = cast(Table, InboxUpdate.__table__)
_NOW = bindparam("now", type_=UTCDateTime())
_HOLDER = bindparam("holder", type_=String())
_ROW = bindparam("row_id", type_=Integer())
_SENDER_USER = select(User.id).where(User.telegram_id == _T.c.telegram_user_id).scalar_subquery()


def _claim_statement() -> Any:
    # The head of each conversation's queue: no earlier open row, and no open row of it leased now
    # (rows can commit out of update_id order; a conversation never has two rows in flight).
    other = _T.alias("other")
    busy_or_earlier = exists().where(
        other.c.queue_key == _T.c.queue_key,
        other.c.status.in_(OPEN),
        other.c.id != _T.c.id,
        or_(other.c.update_id < _T.c.update_id, other.c.lease_expires_at >= _NOW),
    )
    claimable = (
        select(_T.c.id)
        .where(
            _T.c.status.in_(OPEN),
            _T.c.available_at <= _NOW,
            or_(_T.c.lease_expires_at.is_(None), _T.c.lease_expires_at < _NOW),
            ~busy_or_earlier,
        )
        .order_by(_T.c.update_id)
        .limit(bindparam("limit", type_=Integer()))
    )
    values = {
        _T.c.lease_holder: _HOLDER,
        _T.c.lease_expires_at: bindparam("expires", type_=UTCDateTime()),
        _T.c.attempts: _T.c.attempts + 1,
        # A reply recorded by a worker that stopped before it finished: it may have reached
        # Telegram already (the window between Telegram's answer and our record of it).
        _T.c.resumed_sends: _T.c.resumed_sends + case((_T.c.status == "replying", 1), else_=0),
    }
    returning = [
        _T.c.id,
        _T.c.update_id,
        _T.c.telegram_user_id,
        _T.c.chat_id,
        _T.c.payload,
        _T.c.status,
        _T.c.reply_text,
        _T.c.reply_chunks_sent,
        _T.c.attempts,
    ]
    return work.claim(_T, _T.c.id, claimable, values=values, returning=returning, many=True)


def _insert_leased_statement(insert: Any) -> Any:
    # One update, stored and leased in one statement (one round trip instead of two): leased when
    # its conversation has no other open row, so it heads that queue (the claim's own rule).
    queue = bindparam("queue_key", type_=BigInteger())
    other = _T.alias("other")
    free = (
        select((~exists().where(other.c.queue_key == queue, other.c.status.in_(OPEN))).label("free"))
        .subquery("queue_free")
        .c.free
    )
    values = {
        _T.c.update_id: bindparam("update_id", type_=BigInteger()),
        _T.c.telegram_user_id: bindparam("sender", type_=BigInteger()),
        _T.c.chat_id: bindparam("chat_id", type_=BigInteger()),
        _T.c.queue_key: queue,
        _T.c.payload: bindparam("payload", type_=_T.c.payload.type),
        _T.c.status: literal("pending"),
        _T.c.received_at: _NOW,
        _T.c.available_at: _NOW,
        _T.c.attempts: case((free, 1), else_=0),
        _T.c.reply_chunks_sent: literal(0),
        _T.c.resumed_sends: literal(0),
        _T.c.lease_holder: case((free, _HOLDER)),
        _T.c.lease_expires_at: case((free, bindparam("expires", type_=UTCDateTime()))),
    }
    # The WHERE keeps SQLite from reading ON CONFLICT as a join's ON.
    source = select(*values.values()).where(literal(True))
    return (
        insert(_T)
        .from_select(list(values), source)
        .on_conflict_do_nothing(index_elements=["update_id"])
        .returning(_T.c.id, _T.c.lease_holder, _T.c.payload)  # the payload as stored (NULs removed)
    )


_CLAIM = _claim_statement()
_INSERT_LEASED = {
    "postgresql": _insert_leased_statement(postgresql.insert),
    "sqlite": _insert_leased_statement(sqlite.insert),
}
_RENEW = work.renewal(_T, _T.c.id, _T.c.lease_holder, _T.c.lease_expires_at, _T.c.status.in_(OPEN))
# The answer recorded with the first chunk Telegram accepted, by the row's holder, or by the worker
# that released it (a stop cancels the work but lets a send in progress finish) while no one else
# holds it; a repeated answer (its turn found it stored before) may have reached Telegram already:
# a resumed send.
_MINE = (
    _T.c.id == _ROW,
    or_(_T.c.lease_holder == _HOLDER, _T.c.lease_holder.is_(None)),
    _T.c.status == "pending",
)
_RESUMED = _T.c.resumed_sends + bindparam("repeated", type_=Integer())
_RECORD_SENT = (
    update(_T)
    .where(*_MINE)
    .values(
        status="replying",
        reply_text=bindparam("reply", type_=Text()),
        reply_chunks_sent=bindparam("sent", type_=Integer()),
        resumed_sends=_RESUMED,
        user_id=_SENDER_USER,
    )
)
_SENT_UNHELD = update(_T).where(_T.c.id == _ROW).values(resumed_sends=_T.c.resumed_sends + 1)
_CHUNK_SENT = (
    update(_T)
    .where(_T.c.id == _ROW, _T.c.status == "replying")
    .values(reply_chunks_sent=bindparam("sent", type_=Integer()))
)
_FINISH = (
    update(_T)
    .where(_T.c.id == _ROW, _T.c.status != "done")
    .values(
        status="done",
        outcome=bindparam("outcome", type_=String()),
        done_at=_NOW,
        payload=None,
        reply_text=None,
        reply_chunks_sent=bindparam("sent", type_=Integer()),
        lease_holder=None,
        lease_expires_at=None,
        last_error=bindparam("error", type_=Text()),
        user_id=func.coalesce(_T.c.user_id, _SENDER_USER),
    )
)
# An answer of one chunk: recorded and finished at once.
_RECORD_DONE = _FINISH.where(*_MINE).values(resumed_sends=_RESUMED)
_RELEASE = (
    update(_T)
    .where(_T.c.id == _ROW, _T.c.lease_holder == _HOLDER, _T.c.status != "done")
    .values(
        lease_holder=None,
        lease_expires_at=None,
        available_at=bindparam("available_at", type_=UTCDateTime()),
        last_error=bindparam("error", type_=Text()),
    )
)


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


class InboxRepository:
    """Statements on `inbox_updates`; every write of a leased row checks the lease where it matters."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.postgres = session.get_bind().dialect.name == "postgresql"

    async def relax_durability(self) -> None:
        """This transaction may be lost in a database server crash (PostgreSQL: asynchronous commit)."""
        if self.postgres:
            await self.session.execute(text("SET LOCAL synchronous_commit TO OFF"))

    async def add(self, updates: Sequence[NewUpdate], *, now: datetime) -> int:
        """Insert updates not seen before (a repeated update_id is ignored); return how many were new.

        Updates without a sender have nothing to answer: they are stored done, without their JSON;
        dead updates too, with their reason (outcome `dead`).
        """
        if not updates:
            return 0
        rows = [self._row(u, now) for u in updates]
        dialect = postgresql if self.postgres else sqlite
        stmt = (
            dialect.insert(_T)
            .values(rows)
            .on_conflict_do_nothing(index_elements=["update_id"])
            .returning(_T.c.id)
        )
        added = len((await self.session.execute(stmt)).all())
        stops = {
            (u.chat_id, u.draft_stop) for u in updates if u.chat_id is not None and u.draft_stop is not None
        }
        if stops:
            await add_stops(self.session, sorted(stops), now=now)
        return added

    @staticmethod
    def _row(u: NewUpdate, now: datetime) -> dict[str, Any]:
        worked = u.telegram_user_id is not None and u.dead is None
        return {
            "update_id": u.update_id,
            "telegram_user_id": u.telegram_user_id,
            "chat_id": u.chat_id,
            "queue_key": u.queue_key,
            "payload": u.payload if worked else None,
            "status": "pending" if worked else "done",
            "outcome": None
            if worked
            else "dead"
            if u.dead is not None
            else "handled"
            if u.draft_stop is not None
            else "ignored",
            "last_error": u.dead,
            "received_at": now,
            "available_at": now,
            "done_at": None if worked else now,
            "attempts": 0,
            "reply_chunks_sent": 0,
            "resumed_sends": 0,
        }

    async def add_leased(
        self, update: NewUpdate, *, holder: str, now: datetime, lease: timedelta
    ) -> tuple[bool, LeasedUpdate | None]:
        """Insert one update with a sender and lease it to `holder` when it heads its conversation's queue.

        Returns whether it was new, and the leased row (None when it waits behind an earlier one).
        """
        update_id = update.update_id
        assert update.telegram_user_id is not None and update.dead is None, "stored done, not leased"
        assert update_id is not None, "only a dead update has no id"
        params = {
            "update_id": update.update_id,
            "sender": update.telegram_user_id,
            "chat_id": update.chat_id,
            "queue_key": update.queue_key,
            "payload": update.payload,
            "now": now,
            "holder": holder,
            "expires": now + lease,
        }
        stmt = _INSERT_LEASED["postgresql" if self.postgres else "sqlite"]
        row = (await self.session.execute(stmt, params)).one_or_none()
        if row is None:
            return False, None
        row_id, lease_holder, payload = row
        if lease_holder is None:
            return True, None
        sender, chat = update.telegram_user_id, update.chat_id
        return True, LeasedUpdate(row_id, update_id, sender, chat, payload, "pending", None, 0, 1)

    async def claim(self, *, holder: str, now: datetime, lease: timedelta, limit: int) -> list[LeasedUpdate]:
        """Lease up to `limit` claimable rows, oldest first, at most one per conversation."""
        if limit <= 0:
            return []
        params = {"now": now, "holder": holder, "expires": now + lease, "limit": limit}
        rows = (await self.session.execute(_CLAIM, params)).all()
        return sorted((LeasedUpdate(*row) for row in rows), key=lambda row: row.update_id)

    async def renew(
        self, row_ids: Sequence[int], *, holder: str, now: datetime, lease: timedelta
    ) -> set[int]:
        """Extend the holder's leases of these rows (the ones it works); return the ids still held.

        Only the rows named: a row its worker gave up on (say, one whose commit was reported failed
        but happened) runs out of lease and is taken again, instead of staying held for good.
        """
        if not row_ids:
            return set()
        params = {"holder": holder, "until": now + lease, "keys": list(row_ids)}
        return set((await self.session.execute(_RENEW, params)).scalars())

    async def record_sent(
        self, row_id: int, *, holder: str, reply: str, sent: int, total: int, repeated: bool, now: datetime
    ) -> bool:
        """Record the answer with its first `sent` chunks Telegram accepted (all `total`: the row is
        done); False when the row is no longer the holder's."""
        params = {"row_id": row_id, "holder": holder, "sent": sent, "repeated": int(repeated)}
        if sent < total:
            result = await self.session.execute(_RECORD_SENT, {**params, "reply": reply})
        else:
            done = {"now": now, "outcome": "answered", "error": None}
            result = await self.session.execute(_RECORD_DONE, {**params, **done})
        return bool(_rowcount(result))

    async def sent_unheld(self, row_id: int) -> None:
        """A chunk Telegram accepted from a worker that no longer held the row: the holder may send
        the answer too, so it counts as a resumed send."""
        await self.session.execute(_SENT_UNHELD, {"row_id": row_id})

    async def chunk_sent(self, row_id: int, *, sent: int) -> None:
        """Telegram accepted the first `sent` chunks of the recorded reply."""
        await self.session.execute(_CHUNK_SENT, {"row_id": row_id, "sent": sent})

    async def finish(
        self, row_id: int, *, now: datetime, outcome: str, sent: int = 0, error: str | None = None
    ) -> bool:
        """Mark a row done and drop its text (payload and reply); False when it was done or deleted."""
        params = {"row_id": row_id, "now": now, "outcome": outcome, "sent": sent, "error": error}
        return bool(_rowcount(await self.session.execute(_FINISH, params)))

    async def release(self, row_id: int, *, holder: str, available_at: datetime, error: str | None) -> None:
        """Give a row back, to be tried again from `available_at`."""
        params = {"row_id": row_id, "holder": holder, "available_at": available_at, "error": error}
        await self.session.execute(_RELEASE, params)

    async def release_all(self, *, holder: str | None = None) -> int:
        """Drop the leases of one holder (a graceful stop), or every lease (a single process starting)."""
        stmt = update(_T).where(_T.c.status.in_(OPEN), _T.c.lease_holder.is_not(None))
        if holder is not None:
            stmt = stmt.where(_T.c.lease_holder == holder)
        return _rowcount(await self.session.execute(stmt.values(lease_holder=None, lease_expires_at=None)))

    async def prune(self, *, done_before: datetime, limit: int = 5000) -> int:
        """Delete done rows finished before the cut-off (a batch at a time)."""
        old = select(_T.c.id).where(_T.c.status == "done", _T.c.done_at < done_before).limit(limit)
        return _rowcount(await self.session.execute(delete(_T).where(_T.c.id.in_(old.scalar_subquery()))))

    async def forget_sender(self, telegram_user_id: int, *, current_update_id: int | None = None) -> int:
        """Delete a sender's finished rows and the one being worked (/forget); rows still waiting are
        messages sent after the /forget, which stay. The stops pressed in their private chat (whose id
        is theirs) go too, with the rows that brought them."""
        mine = _T.c.telegram_user_id == telegram_user_id
        their_stops = _T.c.telegram_user_id.is_(None) & (_T.c.chat_id == telegram_user_id)
        stmt = delete(_T).where(
            or_(mine, their_stops), or_(_T.c.status == "done", _T.c.update_id == current_update_id)
        )
        deleted = _rowcount(await self.session.execute(stmt))
        await forget_stops(self.session, telegram_user_id)
        return deleted

    async def counts(self) -> dict[str, int]:
        """Rows by status (for /tasks/inbox and the admin's view)."""
        stmt = select(_T.c.status, func.count()).group_by(_T.c.status)
        return {status: int(n) for status, n in (await self.session.execute(stmt)).all()}
