"""What post-processing keeps of conversations: day summaries, threads, thoughts, facts, search chunks."""

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
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, BigIntPK, JSONType

# The status of a past day an import brought (with no live talk that day): the nightly and in-day
# summaries leave it alone; the import's post-processing (jobs/imported.py) summarises and finalises it.
IMPORTED_DAY = "imported"


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
    status: Mapped[str] = mapped_column(String(16), default="open")  # open | final | imported (IMPORTED_DAY)
    finalized_at: Mapped[datetime | None]
    # Set by "Regenerate summary" in the timeline: the day-summaries job rewrites it.
    regenerate_requested_at: Mapped[datetime | None]
    # The summary version (`summary_updated_at`) whose key moments the knowledge graph's relationship
    # group shows, one episode for the day: each version rewrites the whole list, so the day is the
    # graph's item and needs no id per moment. Only a final day's moments are shown.
    graph_version: Mapped[datetime | None]


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
    # The words (dedupe key) the knowledge graph's persona group shows of it; None: nothing yet.
    graph_key: Mapped[str | None] = mapped_column(String(64))


class UserFact(Base):
    """A durable fact or preference about a person or a group: the one list of what the bot knows.

    Written by post-processing, the memory tools and the voice agent; read by the profile in every
    prompt, per-message recall, `memory_search`, /memory, the Mini App and /export.
    """

    __tablename__ = "user_facts"
    __table_args__ = (
        UniqueConstraint("user_id", "dedupe_key", name="uq_user_facts_user_dedupe"),
        Index("ix_user_facts_user_held", "user_id", "invalidated_at"),
    )

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    conversation_id: Mapped[int | None] = mapped_column(ForeignKey("conversations.id", ondelete="SET NULL"))
    content: Mapped[str] = mapped_column(Text)
    # extraction | tool | voice | import (an imported conversation's post-processing)
    source: Mapped[str] = mapped_column(String(16), default="extraction")
    # What the fact is about: identity | people | health | preference | plan | other (None: other).
    # The profile is ordered by it (agent/memory/profile.py).
    category: Mapped[str | None] = mapped_column(String(32))
    # The person pinned it (or asked to have it remembered): first in the profile, never dropped by
    # consolidation without telling them.
    pinned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # "Don't bring this up": kept and found when they ask, never in the profile or recalled unasked.
    hidden: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # How many times it was said or learned (the same fact again reinforces the one row).
    reinforced: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # When it was last said or learned again (created_at at first).
    last_seen_at: Mapped[datetime | None]
    # When it was last changed in place (reworded, pinned, hidden, reinforced).
    updated_at: Mapped[datetime | None]
    # A plan's date: once passed, consolidation retires the fact.
    valid_until: Mapped[datetime | None]
    # The newer fact that replaced this one (a contradiction or a merge); set with invalidated_at.
    superseded_by: Mapped[int | None] = mapped_column(BigInteger)
    # The person's own transcript lines the fact stands on (agent/memory/grounding.py; a tool's fact:
    # the message of the turn that saved it; a voice fact has none):
    # recall search ranks the fact as a unit and returns these turns.
    message_ids: Mapped[list[Any]] = mapped_column(JSONType, default=list, server_default="[]")
    dedupe_key: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    # Taken back by the user ("forget that", "that's wrong"): kept, with when and why, so it is left
    # out of every read and not learned again from the same old messages.
    invalidated_at: Mapped[datetime | None]
    invalid_reason: Mapped[str | None] = mapped_column(Text)
    # The words (their dedupe key) the knowledge graph's episode of the fact shows; None: the graph
    # shows nothing of it. A held fact whose key differs, or a taken-back one with a key, is the
    # graph's work (jobs/graph.py).
    graph_key: Mapped[str | None] = mapped_column(String(64))

    @property
    def seen(self) -> datetime:
        """When it was last said or learned (when it was learned, until it is said again)."""
        return self.last_seen_at or self.created_at


class FactConsolidation(Base):
    """Whether a person's (or a group's) facts changed since they were last tidied, and since the
    knowledge graph last followed them; the lease of the job doing either now (one instance at a time)."""

    __tablename__ = "fact_consolidations"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    # The last change to the owner's facts (an add, a reinforcement, a correction, a reword).
    changed_at: Mapped[datetime]
    # The last change to anything the knowledge graph follows: the facts, a final day's key moments,
    # the persona's thoughts (the graph's signal; tidying reads `changed_at` alone).
    graph_changed_at: Mapped[datetime]
    # The `changed_at` the last finished consolidation saw: equal means nothing to do.
    consolidated_for: Mapped[datetime | None]
    consolidated_at: Mapped[datetime | None]
    lease_until: Mapped[datetime | None]
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    # The same four for the knowledge graph following the list (jobs/graph.py).
    graphed_for: Mapped[datetime | None]
    graph_lease_until: Mapped[datetime | None]
    graph_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    graph_error: Mapped[str | None] = mapped_column(Text)


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
