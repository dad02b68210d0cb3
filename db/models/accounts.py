"""The people the bot talks to, and what decides whether and how often it answers them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, BigIntPK, JSONType


class User(Base):
    """A person the bot talks to, on Telegram or in the terminal chat."""

    __tablename__ = "users"
    # AUTOINCREMENT: SQLite never hands a forgotten user's id to someone new (graph groups and
    # caches are named after it); PostgreSQL sequences never go back anyway. By last message: the
    # quiet users a check-in looks for, and the most recently active ones warmed up at start.
    __table_args__ = (
        Index("ix_users_last_message_at", "last_message_at"),
        Index("uq_users_chat_id", "chat_id", unique=True),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    # "telegram:<id>", "cli:<name>" or "telegram-chat:<group chat id>": one namespace for every surface.
    key: Mapped[str] = mapped_column(String(128), unique=True)
    # A person's Telegram user id; None for a group.
    telegram_id: Mapped[int | None] = mapped_column(BigInteger, unique=True)
    # person | group: a group chat owns its memory as a person does, so every query scoped to an
    # owner keeps a group's memory and its members' private ones apart.
    kind: Mapped[str] = mapped_column(String(8), default="person", server_default="person")
    # A group's Telegram chat id (it changes when the group becomes a supergroup); None for a person.
    chat_id: Mapped[int | None] = mapped_column(BigInteger)
    name: Mapped[str | None] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    # ISO 639-1 code of the language the user writes in (full-text search stems by it); None until
    # known. Set with `agent.search.language.set_language`, which re-indexes the user's rows.
    language: Mapped[str | None] = mapped_column(String(8))
    onboarding_status: Mapped[str] = mapped_column(String(16), default="pending")
    profile: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime]
    last_message_at: Mapped[datetime | None]
    # /followups on|off; None follows TOUCHPOINT_ENABLED.
    followups: Mapped[bool | None] = mapped_column(Boolean)
    # Telegram refused a touchpoint (the user blocked the bot): no more until they write.
    unreachable_at: Mapped[datetime | None]


class AccessRule(Base):
    """An admin's /allow or /deny of one Telegram user, by id ("123") or username ("alice").

    Read by every instance (cached for a few seconds, agent/account/access.py); the latest command for a
    key wins. Names only the people the operator chose to name.
    """

    __tablename__ = "access_rules"

    key: Mapped[str] = mapped_column(String(40), primary_key=True)
    rule: Mapped[str] = mapped_column(String(8))  # allow | deny
    changed_at: Mapped[datetime]
    changed_by: Mapped[int | None] = mapped_column(BigInteger)


class RateLimitEvent(Base):
    """One request counted against a rate limit, for at most a day.

    Keyed by a keyed hash of the surface identity ("telegram:<id>"), not by the user row, so the
    count survives /forget, restarts and several instances; the raw Telegram id is never stored.
    """

    __tablename__ = "rate_limit_events"
    __table_args__ = (
        Index("ix_rate_limit_events_subject", "subject", "scope", "at"),
        Index("ix_rate_limit_events_at", "at"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    subject: Mapped[str] = mapped_column(String(64))
    scope: Mapped[str] = mapped_column(String(16))
    at: Mapped[datetime]


class PendingForget(Base):
    """A /forget whose database part is done while external stores (the graph) are still being cleared.

    Written in the transaction that deletes the user's rows and removed once every store is clear;
    the `forget` job retries what is left. Holds the bare id only, never anything the person said.
    """

    __tablename__ = "pending_forgets"

    user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    requested_at: Mapped[datetime]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
