"""Conversations and their transcript: every message, the context each turn was sent with, compactions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, BigIntPK, JSONType

# A conversation in this status is queued for post-processing (`jobs/queue.py` claims it).
QUEUED = "closed"
# The kind of a conversation the bot opened by writing first, until the user answers in it.
TOUCHPOINT_KIND = "proactive"
# The kinds of a conversation brought from another assistant's export (agent/account/imports):
# its lines are the person's (role "user") and that assistant's (role OTHER), never the companion's.
IMPORTED_KINDS = ("chatgpt", "claude")
# The role of another assistant's line in an imported conversation: neither the person nor the companion.
OTHER = "other"
# The status of an imported conversation stored and waiting for the import pacer (jobs/imports.py),
# which queues it for post-processing (QUEUED) at the operator's pace.
IMPORT_WAITING = "imported"


class Conversation(Base):
    """One session: consecutive messages with no gap longer than the conversation timeout."""

    __tablename__ = "conversations"
    __table_args__ = (
        Index("ix_conversations_user_status", "user_id", "status"),
        Index("ix_conversations_status_last", "status", "last_message_at"),
        # A voice call is stored once however often its post-call webhook arrives.
        Index("uq_conversations_call_id", "call_id", unique=True),
        # An imported conversation is stored once per person however often its export is imported.
        Index("uq_conversations_user_external", "user_id", "external_id", unique=True),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    # active -> closed (QUEUED) -> processing -> processed | failed (closed again on retry);
    # an imported conversation starts as IMPORT_WAITING until the import pacer queues it.
    status: Mapped[str] = mapped_column(String(16), default="active")
    started_at: Mapped[datetime]
    last_message_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    # The PydanticAI history (ModelMessagesTypeAdapter's JSON form) of this conversation.
    messages: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    summary: Mapped[str | None] = mapped_column(Text)
    tone: Mapped[str | None] = mapped_column(String(64))
    # The typed extraction output of post-processing (facts, threads, markers, key moments).
    extraction: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime | None]
    claimed_at: Mapped[datetime | None]
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    processed_at: Mapped[datetime | None]
    # text (Telegram, terminal) | voice (a call's transcript) | proactive (a touchpoint: the bot wrote
    # first; text once the user answers) | chatgpt | claude (IMPORTED_KINDS: brought from an export);
    # call_id is the voice agent's id.
    kind: Mapped[str] = mapped_column(String(16), default="text", server_default="text")
    call_id: Mapped[str | None] = mapped_column(String(128))
    # An imported conversation: the import that brought it, and its id in the export (one row per
    # person and id, so a second import of the same export adds nothing).
    import_id: Mapped[int | None] = mapped_column(ForeignKey("imports.id", ondelete="SET NULL"))
    external_id: Mapped[str | None] = mapped_column(String(200))


class TranscriptMessage(Base):
    """One user, assistant or system message: the searchable source of truth, never compacted."""

    __tablename__ = "transcript_messages"
    __table_args__ = (
        UniqueConstraint("user_id", "role", "telegram_message_id", name="uq_transcript_telegram_id"),
        # One answer per message: a turn whose message another worker answered meanwhile stores none.
        Index(
            "uq_transcript_answer",
            "reply_to_id",
            unique=True,
            postgresql_where=text("role = 'assistant'"),
            sqlite_where=text("role = 'assistant'"),
        ),
        Index("ix_transcript_user_sent", "user_id", "sent_at"),
        Index("ix_transcript_conversation", "conversation_id", "id"),
        # A day's neighbours of a search hit (conversation_search context and rescoring).
        Index("ix_transcript_day_id", "day_segment_id", "id"),
        # A member's words in groups, for their /forget and (when allowed) their own recall.
        Index("ix_transcript_speaker", "speaker_telegram_id"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))  # user | assistant | system | other (OTHER)
    # text | sticker | apology | note | voice | imported
    kind: Mapped[str] = mapped_column(String(32), default="text")
    content: Mapped[str] = mapped_column(Text)
    telegram_message_id: Mapped[int | None] = mapped_column(BigInteger)
    reply_to_id: Mapped[int | None] = mapped_column(BigInteger)
    day_segment_id: Mapped[int | None] = mapped_column(
        ForeignKey("day_segments.id", ondelete="SET NULL"), index=True
    )
    sent_at: Mapped[datetime]
    # Who said a group's message (Telegram user id and the name shown then); None in a private chat.
    speaker_telegram_id: Mapped[int | None] = mapped_column(BigInteger)
    speaker_name: Mapped[str | None] = mapped_column(String(200))


class GeneratedPrompt(Base):
    """The context snapshot of one turn: what the model was given and what was left out.

    Diagnostic data: the `retention` job deletes snapshots older than SNAPSHOT_RETENTION_DAYS but the
    newest of each conversation and of each person, and clears `instructions` on every snapshot but
    the person's newest (the one /context shows).
    """

    __tablename__ = "generated_prompts"
    __table_args__ = (
        Index("ix_generated_prompts_user", "user_id", "id"),
        # The newest snapshot of a conversation (kept by retention), and the cascade of its deletion.
        Index("ix_generated_prompts_conversation", "conversation_id", "id"),
        # Retention finds the old snapshots, and the turn roll-up a day's, by time.
        Index("ix_generated_prompts_created", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    message_id: Mapped[int | None] = mapped_column(ForeignKey("transcript_messages.id", ondelete="CASCADE"))
    instructions: Mapped[str] = mapped_column(Text, default="")
    context_snapshot: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime]


class HistoryCompaction(Base):
    """A summary of a conversation's older turns that stands in for them in what the model is sent.

    Keyed by the last stored message it covers (its position and a digest), so it is computed once
    and reused on later turns; the stored history and the transcript are never changed by it.
    """

    __tablename__ = "history_compactions"
    __table_args__ = (
        UniqueConstraint("conversation_id", "covered_messages", name="uq_history_compactions_covered"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    # How many messages of the stored history (from the start) the summary replaces.
    covered_messages: Mapped[int] = mapped_column(Integer)
    # sha256 of the last covered message: a history that changed under the summary invalidates it.
    last_message_digest: Mapped[str] = mapped_column(String(64))
    summary: Mapped[str] = mapped_column(Text)
    summary_tokens: Mapped[int] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime]
