"""Imports of a person's history from another assistant's export (ChatGPT, Claude)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, BigIntPK


class ImportRun(Base):
    """One export a person brought: what it holds, how far storing it got, where its file is.

    Conversations are stored one transaction each (with all their messages), so a run that stopped
    resumes at the first conversation not yet stored and never stores a message twice.
    """

    __tablename__ = "imports"
    __table_args__ = (UniqueConstraint("user_id", "digest", name="uq_imports_user_digest"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # chatgpt | claude
    source: Mapped[str] = mapped_column(String(16))
    # sha256 of the file as sent: the same file imported again is the same run.
    digest: Mapped[str] = mapped_column(String(64))
    file_name: Mapped[str | None] = mapped_column(String(200))
    # Where the file can be read again to resume: a local path, or "telegram:<file_id>".
    file_ref: Mapped[str | None] = mapped_column(Text)
    # previewed -> running -> stored | failed | cancelled
    status: Mapped[str] = mapped_column(String(16), default="previewed")
    conversations_total: Mapped[int] = mapped_column(Integer, default=0)
    messages_total: Mapped[int] = mapped_column(Integer, default=0)
    conversations_stored: Mapped[int] = mapped_column(Integer, default=0)
    messages_stored: Mapped[int] = mapped_column(Integer, default=0)
    first_at: Mapped[datetime | None]
    last_at: Mapped[datetime | None]
    # The Telegram chat and message edited with the progress (None from the command line).
    chat_id: Mapped[int | None] = mapped_column(BigInteger)
    progress_message_id: Mapped[int | None] = mapped_column(BigInteger)
    # The lease of the process storing it now (a run whose lease lapsed is resumed by another).
    claimed_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    # When the person was told what their import taught the bot (its conversations all post-processed).
    learned_at: Mapped[datetime | None]
