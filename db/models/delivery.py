"""Telegram updates held durably until they are answered."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, BigIntPK, JSONType


class InboxUpdate(Base):
    """One Telegram update, committed before Telegram is told we have it (durable delivery).

    `pending` rows wait for their turn (per conversation, `queue_key`, oldest update first); a worker
    leases the head row (its holder, `lease_holder`, until `lease_expires_at`). The turn's own
    transaction records the reply (`replying`, `reply_text`); the row is `done` once every chunk was
    sent. Done rows keep no text (payload and reply cleared), only ids, times and, for dead rows, the
    reason; they are pruned after the retention period.
    """

    __tablename__ = "inbox_updates"
    __table_args__ = (
        Index("ix_inbox_updates_status_update", "status", "update_id"),
        Index("ix_inbox_updates_queue", "queue_key", "status", "update_id"),
        Index("ix_inbox_updates_sender", "telegram_user_id"),
        Index("ix_inbox_updates_done", "done_at"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    # None only on a dead row whose update_id did not fit 64 bits.
    update_id: Mapped[int | None] = mapped_column(BigInteger, unique=True)
    # Who sent it (None: channel posts and other updates without a user, done on arrival).
    telegram_user_id: Mapped[int | None] = mapped_column(BigInteger)
    chat_id: Mapped[int | None] = mapped_column(BigInteger)
    # The conversation the update belongs to: its chat (a private chat's id is the user's), else its
    # sender. One conversation's rows are worked one at a time, in order; different ones side by side.
    queue_key: Mapped[int | None] = mapped_column(BigInteger)
    # The stored user, filled when the row is answered: /forget's deletion of the user takes the rows.
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending | replying | done
    # What happened: answered | handled | ignored | duplicate | dead | undeliverable. `dead`: it can
    # never be worked (out of Telegram's ranges, or a failure that is not transient); `last_error` says why.
    outcome: Mapped[str | None] = mapped_column(String(16))
    received_at: Mapped[datetime]
    available_at: Mapped[datetime]
    lease_holder: Mapped[str | None] = mapped_column("lease_owner", String(64), key="lease_holder")
    lease_expires_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    reply_text: Mapped[str | None] = mapped_column(Text)
    reply_chunks_sent: Mapped[int] = mapped_column(Integer, default=0)
    # Times a recorded reply was taken up again after its sender stopped (the crash window).
    resumed_sends: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    done_at: Mapped[datetime | None]
