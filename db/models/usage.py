"""Metering: model calls and tokens per user and day, and the bot-wide counters of a day."""

from __future__ import annotations

from datetime import date

from sqlalchemy import BigInteger, Date, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base

# The usage kind of the post-processing of imported conversations (agent/core/usage.py): counted
# apart, against IMPORT_DAILY_TOKENS and never against the person's daily cap for chat.
IMPORT_USAGE = "import"


class ModelUsage(Base):
    """Model calls and tokens of one user on one UTC day, per kind of use (cost in view).

    `kind` is chat, onboarding, compaction, extraction, consolidation, day_summary, graph, briefing,
    embedding, proactive (a touchpoint composed) or import (IMPORT_USAGE: an imported conversation
    post-processed). Input tokens include those read from and written to the provider's prompt cache,
    which the cache columns count again (1-hour writes are part of the writes). Counts only, never
    text; deleted with the user.
    """

    __tablename__ = "model_usage"
    # The days' rows of everyone: /stats sums them per kind (db/repositories/usage.py); the bot-wide
    # budget reads the day's counter instead (db/ddl/usage.py).
    __table_args__ = (Index("ix_model_usage_day", "day"),)

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_read_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    cache_write_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    cache_write_1h_tokens: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class DailyCount(Base):
    """A bot-wide counter of one UTC day: refused strangers, budget refusals, and the day's tokens
    (kept by triggers on `model_usage`, db/ddl/usage.py). Counts only, no ids."""

    __tablename__ = "daily_counts"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger, default=0)


class TurnDay(Base):
    """The answered turns of one UTC day, bot-wide: how many and their p95 time to an answer.

    Counted from the context snapshots by the `retention` job before it deletes old ones, so the
    dashboard's charts outlive the snapshots. Counts only, no ids: /forget has nothing here to delete.
    """

    __tablename__ = "turn_days"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    turns: Mapped[int] = mapped_column(Integer, default=0)
    # Turns whose time to an answer was recorded, and the nearest-rank p95 of those times.
    timed: Mapped[int] = mapped_column(Integer, default=0)
    p95_ms: Mapped[float | None] = mapped_column(Float)
