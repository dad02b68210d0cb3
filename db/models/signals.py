"""What people signal about the bot's answers: the stop button pressed on a draft, and reactions.
Imported through `db.models`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, BigIntPK


class DraftStop(Base):
    """The stop button pressed on a streamed draft: the turn writing that draft ends, in whichever
    instance runs it (that instance looks here between drafts). Ids only; pruned with the inbox."""

    __tablename__ = "draft_stops"
    __table_args__ = (Index("ix_draft_stops_at", "stopped_at"),)

    chat_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    draft_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    stopped_at: Mapped[datetime]


class MessageReaction(Base):
    """One emoji a user put on (or took off) one of the bot's answers, as Telegram reported it.

    `emoji` is the emoji itself, "custom:<id>" for a custom emoji, or "paid" (a star reaction).
    Deleted with the user (/forget) or with the answer.
    """

    __tablename__ = "message_reactions"
    __table_args__ = (
        Index("ix_message_reactions_user", "user_id", "reacted_at"),
        Index("ix_message_reactions_message", "message_id"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    # The answer reacted to (an assistant transcript row).
    message_id: Mapped[int] = mapped_column(ForeignKey("transcript_messages.id", ondelete="CASCADE"))
    emoji: Mapped[str] = mapped_column(String(64))
    added: Mapped[bool] = mapped_column(Boolean)  # False: the emoji was taken off
    reacted_at: Mapped[datetime]
