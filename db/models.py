"""SQLAlchemy models: one schema for SQLite and PostgreSQL (JSON becomes JSONB on PostgreSQL)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Date,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base as Base
from db.base import BigIntPK as BigIntPK
from db.base import JSONType as JSONType
from db.base import UTCDateTime as UTCDateTime


class User(Base):
    """A person the bot talks to, on Telegram or in the terminal chat."""

    __tablename__ = "users"
    # AUTOINCREMENT: SQLite never hands a forgotten user's id to someone new (graph groups and
    # caches are named after it); PostgreSQL sequences never go back anyway. By last message: the
    # quiet users a check-in looks for, and the most recently active ones warmed up at start.
    __table_args__ = (
        Index("ix_users_last_message_at", "last_message_at"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    # "telegram:<id>" or "cli:<name>": one namespace for every surface.
    key: Mapped[str] = mapped_column(String(128), unique=True)
    telegram_id: Mapped[int | None] = mapped_column(BigInteger, unique=True)
    name: Mapped[str | None] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    # ISO 639-1 code of the language the user writes in (full-text search stems by it); None until
    # known. Set with `agent.search.language.set_language`, which re-indexes the user's rows.
    language: Mapped[str | None] = mapped_column(String(8))
    onboarding_status: Mapped[str] = mapped_column(String(16), default="pending")
    profile: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime]
    last_message_at: Mapped[datetime | None]
    # /followups on|off; None follows PROACTIVE_ENABLED.
    followups: Mapped[bool | None] = mapped_column(Boolean)
    # Telegram refused a proactive message (the user blocked the bot): no more until they write.
    unreachable_at: Mapped[datetime | None]


# A conversation in this status is queued for post-processing (`jobs/queue.py` claims it).
QUEUED = "closed"
# The kind of a conversation the bot opened by writing first, until the user answers in it.
PROACTIVE = "proactive"


class Conversation(Base):
    """One session: consecutive messages with no gap longer than the session timeout."""

    __tablename__ = "conversations"
    __table_args__ = (
        Index("ix_conversations_user_status", "user_id", "status"),
        Index("ix_conversations_status_last", "status", "last_message_at"),
        # A voice call is stored once however often its post-call webhook arrives.
        Index("uq_conversations_call_id", "call_id", unique=True),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    # active -> closed (QUEUED) -> processing -> processed | failed (closed again on retry)
    status: Mapped[str] = mapped_column(String(16), default="active")
    started_at: Mapped[datetime]
    last_message_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    # The PydanticAI history (ModelMessagesTypeAdapter's JSON form) of this session.
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
    # text (Telegram, terminal) | voice (a call's transcript) | proactive (the bot wrote first; text
    # once the user answers); call_id is the voice agent's id.
    kind: Mapped[str] = mapped_column(String(16), default="text", server_default="text")
    call_id: Mapped[str | None] = mapped_column(String(128))


class TranscriptMessage(Base):
    """One user, assistant or system message: the searchable source of truth, never compacted."""

    __tablename__ = "transcript_messages"
    __table_args__ = (
        UniqueConstraint("user_id", "role", "telegram_message_id", name="uq_transcript_telegram_id"),
        Index("ix_transcript_user_sent", "user_id", "sent_at"),
        Index("ix_transcript_conversation", "conversation_id", "id"),
        # A day's neighbours of a search hit (conversation_search context and rescoring).
        Index("ix_transcript_day_id", "day_segment_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))  # user | assistant | system
    kind: Mapped[str] = mapped_column(String(32), default="text")  # text | sticker | apology | note | voice
    content: Mapped[str] = mapped_column(Text)
    telegram_message_id: Mapped[int | None] = mapped_column(BigInteger)
    reply_to_id: Mapped[int | None] = mapped_column(BigInteger)
    day_segment_id: Mapped[int | None] = mapped_column(
        ForeignKey("day_segments.id", ondelete="SET NULL"), index=True
    )
    sent_at: Mapped[datetime]


class GeneratedPrompt(Base):
    """The context snapshot of one turn: what the model was given and what was left out."""

    __tablename__ = "generated_prompts"
    __table_args__ = (Index("ix_generated_prompts_user", "user_id", "id"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    message_id: Mapped[int | None] = mapped_column(ForeignKey("transcript_messages.id", ondelete="CASCADE"))
    instructions: Mapped[str] = mapped_column(Text, default="")
    context_snapshot: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime]


class DaySegment(Base):
    """One calendar day of a user in their timezone; opens at the first message of that day."""

    __tablename__ = "day_segments"
    __table_args__ = (UniqueConstraint("user_id", "day", name="uq_day_segments_user_day"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    day: Mapped[date] = mapped_column(Date)
    timezone: Mapped[str] = mapped_column(String(64))
    first_message_at: Mapped[datetime]
    last_message_at: Mapped[datetime]
    first_message_id: Mapped[int | None] = mapped_column(BigInteger)
    last_message_id: Mapped[int | None] = mapped_column(BigInteger)
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    # Hybrid Markdown: Summary / Goals / Decisions / Open loops / Next steps.
    summary: Mapped[str | None] = mapped_column(Text)
    key_moments: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    messages_since_summary: Mapped[int] = mapped_column(Integer, default=0)
    last_summarized_message_id: Mapped[int | None] = mapped_column(BigInteger)
    summary_updated_at: Mapped[datetime | None]
    summary_due: Mapped[bool] = mapped_column(Boolean, default=False)
    status: Mapped[str] = mapped_column(String(16), default="open")  # open | final
    finalized_at: Mapped[datetime | None]
    # Set by "Regenerate summary" in the timeline: the day-summaries job rewrites it.
    regenerate_requested_at: Mapped[datetime | None]


class ConversationThread(Base):
    """A topic left open (follow_up, question, promise, topic, curiosity, callback)."""

    __tablename__ = "conversation_threads"
    __table_args__ = (
        UniqueConstraint("user_id", "dedupe_key", name="uq_threads_user_dedupe"),
        Index("ix_threads_user_status", "user_id", "status"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="SET NULL"))
    type: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="open")  # open | resolved
    # Stable per source so a rerun of post-processing never opens the same thread twice.
    dedupe_key: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    resolved_at: Mapped[datetime | None]
    resolved_by_conversation_id: Mapped[int | None] = mapped_column(BigInteger)


class Thought(Base):
    """Something the persona thought about the conversation, for later."""

    __tablename__ = "thoughts"
    __table_args__ = (UniqueConstraint("user_id", "dedupe_key", name="uq_thoughts_user_dedupe"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="SET NULL"))
    content: Mapped[str] = mapped_column(Text)
    dedupe_key: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    used_at: Mapped[datetime | None]


class UserFact(Base):
    """A durable fact or preference about the user (extraction or the memory_add tool)."""

    __tablename__ = "user_facts"
    __table_args__ = (UniqueConstraint("user_id", "dedupe_key", name="uq_user_facts_user_dedupe"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="SET NULL"))
    content: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16), default="extraction")  # extraction | tool | voice
    # What the fact is about, when the writer said (the voice agent's update_memory).
    category: Mapped[str | None] = mapped_column(String(32))
    # The transcript messages the fact comes from (the extraction names them; a tool's fact has none):
    # recall search ranks the fact as a unit and returns these turns.
    message_ids: Mapped[list[Any]] = mapped_column(JSONType, default=list, server_default="[]")
    dedupe_key: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    # Taken back by the user ("forget that", "that's wrong"): kept, with when and why, so it is left
    # out of every read and not learned again from the same old messages.
    invalidated_at: Mapped[datetime | None]
    invalid_reason: Mapped[str | None] = mapped_column(Text)


class HistoryCompaction(Base):
    """A summary of a session's older turns that stands in for them in what the model is sent.

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


class SearchChunk(Base):
    """Embeddings of a run of contiguous messages of one day (or of a day summary), for recall search.

    A chunk holds ~400-800 tokens; MiniLM reads at most 256 word pieces, so a chunk is embedded as
    `sections` (index ranges into `message_ids`, each under the section budget) and `vectors` is
    the float32 matrix (sections x dimensions). Derived data: `python -m bot reindex` rebuilds it.
    """

    __tablename__ = "search_chunks"
    __table_args__ = (Index("ix_search_chunks_user", "user_id", "id"),)

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    day_segment_id: Mapped[int | None] = mapped_column(
        ForeignKey("day_segments.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(16), default="messages")  # messages | summary
    message_ids: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    sections: Mapped[list[Any]] = mapped_column(JSONType, default=list)
    first_message_id: Mapped[int | None] = mapped_column(BigInteger)
    last_message_id: Mapped[int | None] = mapped_column(BigInteger)
    token_count: Mapped[int] = mapped_column(Integer, default=0)
    # sha256 of what was embedded (a day summary that changed is embedded again).
    digest: Mapped[str] = mapped_column(String(64))
    embedder: Mapped[str] = mapped_column(String(64))
    dimensions: Mapped[int] = mapped_column(Integer)
    vectors: Mapped[bytes] = mapped_column(LargeBinary)
    last_sent_at: Mapped[datetime]
    created_at: Mapped[datetime]


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


class InboxUpdate(Base):
    """One Telegram update, committed before Telegram is told we have it (durable delivery).

    `pending` rows wait for their turn (per conversation, `queue_key`, oldest update first); a worker
    leases the head row (`lease_owner` until `lease_expires_at`). The turn's own transaction records the reply
    (`replying`, `reply_text`); the row is `done` once every chunk was sent. Done rows keep no text
    (payload and reply cleared), only ids, times and, for dead rows, the reason; they are pruned after
    the retention period.
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
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    reply_text: Mapped[str | None] = mapped_column(Text)
    reply_chunks_sent: Mapped[int] = mapped_column(Integer, default=0)
    # Times a recorded reply was taken up again after its sender stopped (the crash window).
    resumed_sends: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    done_at: Mapped[datetime | None]


def _full_text_ddl() -> None:
    """Create the FTS5 tables / tsvector columns whenever `create_all` creates their base tables."""
    from sqlalchemy import DDL, event

    from db import search_ddl

    for table, by_dialect in (
        (
            TranscriptMessage.__table__,
            {"sqlite": search_ddl.SQLITE_TRANSCRIPT, "postgresql": search_ddl.POSTGRES_TRANSCRIPT},
        ),
        (
            DaySegment.__table__,
            {"sqlite": search_ddl.SQLITE_SUMMARIES, "postgresql": search_ddl.POSTGRES_SUMMARIES},
        ),
    ):
        for dialect, statements in by_dialect.items():
            for statement in statements:
                event.listen(table, "after_create", DDL(statement).execute_if(dialect=dialect))  # type: ignore[no-untyped-call]


_full_text_ddl()


def _usage_ddl() -> None:
    """Create the day's token counter triggers (db/usage_ddl.py) once `create_all` made every table."""
    from sqlalchemy import DDL, event

    from db import usage_ddl

    for dialect in ("sqlite", "postgresql"):
        for statement in usage_ddl.upgrade_statements(dialect):
            event.listen(Base.metadata, "after_create", DDL(statement).execute_if(dialect=dialect))  # type: ignore[no-untyped-call]


_usage_ddl()


class ModelUsage(Base):
    """Model calls and tokens of one user on one UTC day, per kind of use (cost in view).

    `kind` is chat, onboarding, compaction, extraction, day_summary, graph, briefing, embedding or
    proactive. Input tokens include those read from and written to the provider's prompt cache,
    which the cache columns count again (1-hour writes are part of the writes). Counts only, never
    text; deleted with the user.
    """

    __tablename__ = "model_usage"
    # The days' rows of everyone: /stats sums them per kind (db/repositories/usage.py); the bot-wide
    # budget reads the day's counter instead (db/usage_ddl.py).
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


class DailyCount(Base):
    """A bot-wide counter of one UTC day: refused strangers, budget refusals, and the day's tokens
    (kept by triggers on `model_usage`, db/usage_ddl.py). Counts only, no ids."""

    __tablename__ = "daily_counts"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger, default=0)


# What the bot prepares while the user is away lives in its own module (on the same base); importing
# it here registers its tables wherever the models are loaded, and keeps `db.models` the one place to
# import a model from.
from db.answer_signals import DraftStop as DraftStop  # noqa: E402
from db.answer_signals import MessageReaction as MessageReaction  # noqa: E402
from db.prepared import Briefing as Briefing  # noqa: E402
from db.prepared import Reminder as Reminder  # noqa: E402
from db.prepared import Touchpoint as Touchpoint  # noqa: E402
