"""What the bot prepares while the user is away: the briefing written from their context package,
the touchpoints it plans to send first, and the reminders the user set. Imported through `db.models`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, BigIntPK, JSONType


class Briefing(Base):
    """A user's briefing: the context the summary model wrote from their context package in idle time.

    One row per user, the newest valid one (a briefing that fails validation never replaces it).
    `fingerprint` identifies the package it was written from; a turn whose package differs finds it
    stale. Token counts are tiktoken estimates; `calls`/`input_tokens`/`output_tokens` are what
    writing it cost. Deleted with the user.
    """

    __tablename__ = "briefings"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    voice: Mapped[str] = mapped_column(Text)
    fingerprint: Mapped[str] = mapped_column(String(64))
    text_tokens: Mapped[int] = mapped_column(Integer, default=0)
    voice_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # What prompted it: "conversation" (after post-processing) or "nightly".
    trigger: Mapped[str] = mapped_column(String(16))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="SET NULL"))
    calls: Mapped[int] = mapped_column(Integer, default=0)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # The validators' results, and the open threads the briefing says it left out.
    checks: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    written_at: Mapped[datetime]


class Touchpoint(Base):
    """A message the bot plans to send first (a touchpoint: a follow-up or a check-in; or a reminder):
    who, about which thread, when, and how it ended.

    planned -> (leased by a worker) -> sending (text recorded with the transcript row) -> sent, or
    declined (the model chose not to), cancelled (a rule: thread resolved, the user wrote, opted out,
    ...; `outcome` says which), undeliverable (Telegram refused). `dedupe_key` is the idempotency key:
    a rerun of post-processing plans nothing twice.
    """

    __tablename__ = "touchpoints"
    __table_args__ = (
        UniqueConstraint("user_id", "dedupe_key", name="uq_touchpoints_user_dedupe"),
        # The due finder: open rows by due time (one index range scan however many users there are).
        Index("ix_touchpoints_status_due", "status", "due_at"),
        Index("ix_touchpoints_user_status", "user_id", "status"),
        Index("ix_touchpoints_reminder_id", "reminder_id"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    thread_id: Mapped[int | None] = mapped_column(ForeignKey("conversation_threads.id", ondelete="SET NULL"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="SET NULL"))
    kind: Mapped[str] = mapped_column(String(16), default="follow_up")  # follow_up | check_in | reminder
    # A reminder's occurrence (kind "reminder"): the text is the reminder's, written without a model.
    reminder_id: Mapped[int | None] = mapped_column(ForeignKey("reminders.id", ondelete="CASCADE"))
    reason: Mapped[str] = mapped_column(Text)
    due_at: Mapped[datetime]
    # The user's zone when it was planned: the local time the plan meant.
    timezone: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="planned")
    outcome: Mapped[str | None] = mapped_column(String(32))
    dedupe_key: Mapped[str] = mapped_column(String(64))
    planned_at: Mapped[datetime]
    lease_holder: Mapped[str | None] = mapped_column("lease_owner", String(128), key="lease_holder")
    lease_expires_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    text: Mapped[str | None] = mapped_column(Text)
    chunks_sent: Mapped[int] = mapped_column(Integer, default=0)
    transcript_message_id: Mapped[int | None] = mapped_column(BigInteger)
    sent_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)


class Reminder(Base):
    """A reminder the user set in chat: what, and when in their local time, once or repeating.

    Each occurrence is a `touchpoints` row of kind "reminder" (the same leased, exactly-once send as
    touchpoints); `next_local` is the local wall-clock time of the next one, resolved in the user's
    zone when it is planned, so daylight saving and a new zone keep "09:00". active -> done (a
    one-off that went out, or "done" pressed) or cancelled. `dedupe_key` is the idempotency key of
    the message that set it.
    """

    __tablename__ = "reminders"
    __table_args__ = (
        UniqueConstraint("user_id", "dedupe_key", name="uq_reminders_user_dedupe"),
        Index("ix_reminders_user_status", "user_id", "status"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text)
    # once | daily | weekdays | weekly | monthly; `days` are weekday numbers (0 = Monday) for weekly.
    repeat: Mapped[str] = mapped_column(String(16))
    days: Mapped[list[int]] = mapped_column(JSONType, default=list)
    day_of_month: Mapped[int] = mapped_column(Integer)
    # Local "YYYY-MM-DDTHH:MM" of the next occurrence, and the zone it was last planned in.
    next_local: Mapped[str] = mapped_column(String(16))
    timezone: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="active")
    source_message_id: Mapped[int | None] = mapped_column(BigInteger)
    dedupe_key: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    sent_count: Mapped[int] = mapped_column(Integer, default=0)
    snoozed_count: Mapped[int] = mapped_column(Integer, default=0)
