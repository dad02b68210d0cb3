"""Repositories for the memory written by post-processing: threads, thoughts, facts, day summaries.

Inserts are idempotent: every row carries a `dedupe_key` (unique per user) and conflicting inserts are
skipped, so a rerun of a crashed job writes nothing twice. The caller owns the transaction.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import Base, ConversationThread, DaySegment, Thought, TranscriptMessage, UserFact

DAY_SUMMARY_NOTE = "day summary updated"
DAY_SUMMARY_FINAL_NOTE = "day summary finalised"
DAY_SUMMARY_REGENERATED_NOTE = "day summary regenerated"


def normalise(text: str) -> str:
    """Lower case, single spaces, no trailing punctuation: what makes two wordings "the same"."""
    return re.sub(r"\s+", " ", text).strip().lower().rstrip(".!?")


def dedupe_key(*parts: object) -> str:
    """A stable 64-character key from the parts (text parts are normalised first)."""
    raw = "\x1f".join(normalise(p) if isinstance(p, str) else str(p) for p in parts)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def fact_dedupe_key(content: str) -> str:
    """Facts dedupe on content alone: the same fact learnt twice is one fact."""
    return dedupe_key("fact", content)


async def _insert_ignoring_duplicates(
    session: AsyncSession, model: type[Base], rows: list[dict[str, Any]]
) -> int:
    if not rows:
        return 0
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(model).values(rows).on_conflict_do_nothing(index_elements=["user_id", "dedupe_key"])
    result = await session.execute(stmt)
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


class ThreadRepository:
    """Open and resolved conversation threads of one user."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def open_for(self, user_id: int, *, limit: int = 50) -> Sequence[ConversationThread]:
        """The user's open threads, newest first."""
        stmt = (
            select(ConversationThread)
            .where(ConversationThread.user_id == user_id, ConversationThread.status == "open")
            .order_by(ConversationThread.created_at.desc(), ConversationThread.id.desc())
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def open_threads(
        self, user_id: int, conversation_id: int, threads: Iterable[tuple[str, str]], at: datetime
    ) -> int:
        """Open (type, content) threads from a conversation; already-opened ones are skipped."""
        rows = [
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "type": kind,
                "content": content.strip(),
                "status": "open",
                "dedupe_key": dedupe_key("thread", conversation_id, kind, content),
                "created_at": at,
            }
            for kind, content in threads
            if content.strip()
        ]
        return await _insert_ignoring_duplicates(self.session, ConversationThread, _unique(rows))

    async def resolve(
        self, user_id: int, thread_ids: Iterable[int], conversation_id: int, at: datetime
    ) -> int:
        """Resolve the user's open threads among `thread_ids`; other users' ids are ignored."""
        ids = sorted(set(thread_ids))
        if not ids:
            return 0
        result = await self.session.execute(
            update(ConversationThread)
            .where(
                ConversationThread.user_id == user_id,
                ConversationThread.id.in_(ids),
                ConversationThread.status == "open",
            )
            .values(status="resolved", resolved_at=at, resolved_by_conversation_id=conversation_id)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]


class ThoughtRepository:
    """The persona's thoughts about a user."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add_many(
        self, user_id: int, conversation_id: int, contents: Iterable[str], at: datetime
    ) -> int:
        """Store thoughts from a conversation; already-stored ones are skipped."""
        rows = [
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "content": content.strip(),
                "dedupe_key": dedupe_key("thought", conversation_id, content),
                "created_at": at,
            }
            for content in contents
            if content.strip()
        ]
        return await _insert_ignoring_duplicates(self.session, Thought, _unique(rows))

    async def unshared(self, user_id: int, *, limit: int) -> Sequence[Thought]:
        """The newest thoughts not marked used, newest first (those the context shows)."""
        stmt = (
            select(Thought)
            .where(Thought.user_id == user_id, Thought.used_at.is_(None))
            .order_by(Thought.created_at.desc(), Thought.id.desc())
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def mark_used(self, user_id: int, thought_ids: Iterable[int], at: datetime) -> int:
        """Mark the user's thoughts as shared (the context shows them no more); returns how many."""
        ids = sorted(set(thought_ids))
        if not ids:
            return 0
        result = await self.session.execute(
            update(Thought)
            .where(Thought.user_id == user_id, Thought.id.in_(ids), Thought.used_at.is_(None))
            .values(used_at=at)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def for_user(self, user_id: int) -> Sequence[Thought]:
        """All thoughts of a user, oldest first."""
        stmt = select(Thought).where(Thought.user_id == user_id).order_by(Thought.id)
        return (await self.session.execute(stmt)).scalars().all()


class FactRepository:
    """Durable facts about a user, each with the transcript messages it comes from."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add_many(
        self,
        user_id: int,
        conversation_id: int | None,
        contents: Iterable[str],
        at: datetime,
        *,
        source: str,
        category: str | None = None,
    ) -> int:
        """Store facts without sources; a fact already known (same normalised content) is skipped."""
        return await self.add_sourced(
            user_id, conversation_id, [(c, ()) for c in contents], at, source=source, category=category
        )

    async def add_sourced(
        self,
        user_id: int,
        conversation_id: int | None,
        facts: Iterable[tuple[str, Sequence[int]]],
        at: datetime,
        *,
        source: str,
        category: str | None = None,
    ) -> int:
        """Store (content, message ids) facts; returns how many are new.

        A fact already known keeps its row and gains the new message ids (the same fact said again
        points at both places), so a rerun changes nothing.
        """
        sources: dict[str, set[int]] = {}
        rows: list[dict[str, Any]] = []
        for content, message_ids in facts:
            if not content.strip():
                continue
            key = fact_dedupe_key(content)
            sources.setdefault(key, set()).update(int(i) for i in message_ids)
            rows.append(
                {
                    "user_id": user_id,
                    "conversation_id": conversation_id,
                    "content": content.strip(),
                    "source": source,
                    "category": category,
                    "message_ids": [],
                    "dedupe_key": key,
                    "created_at": at,
                }
            )
        for row in rows:
            row["message_ids"] = sorted(sources[row["dedupe_key"]])
        created = await _insert_ignoring_duplicates(self.session, UserFact, _unique(rows))
        wanted = {k: v for k, v in sources.items() if v}
        if wanted:
            stored = await self.session.execute(
                select(UserFact.id, UserFact.dedupe_key, UserFact.message_ids).where(
                    UserFact.user_id == user_id, UserFact.dedupe_key.in_(list(wanted))
                )
            )
            for fact_id, key, known in stored.all():
                merged = sorted(set(known or []) | wanted[key])
                if merged != sorted(known or []):
                    await self.session.execute(
                        update(UserFact)
                        .where(UserFact.id == fact_id)
                        .values(message_ids=merged)
                        .execution_options(synchronize_session=False)
                    )
        return created

    async def for_user(self, user_id: int) -> Sequence[UserFact]:
        """All facts of a user still held (none taken back), oldest first."""
        stmt = (
            select(UserFact)
            .where(UserFact.user_id == user_id, UserFact.invalidated_at.is_(None))
            .order_by(UserFact.id)
        )
        return (await self.session.execute(stmt)).scalars().all()


class DaySummaryRepository:
    """Reading a day's unsummarised messages and storing its summary exactly once per version."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, segment_id: int) -> DaySegment | None:
        """A day segment by id."""
        return await self.session.get(DaySegment, segment_id)

    async def unsummarised(self, segment: DaySegment, *, limit: int = 2000) -> Sequence[TranscriptMessage]:
        """The day's user and assistant messages after its last summary, oldest first."""
        stmt = (
            select(TranscriptMessage)
            .where(
                TranscriptMessage.day_segment_id == segment.id,
                TranscriptMessage.role != "system",
                TranscriptMessage.id > (segment.last_summarized_message_id or 0),
            )
            .order_by(TranscriptMessage.id)
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def store(
        self,
        segment: DaySegment,
        *,
        expected_last_id: int | None,
        summary: str,
        key_moments: list[Any],
        last_message: TranscriptMessage | None,
        at: datetime,
        final: bool,
        regenerated: bool = False,
    ) -> bool:
        """Store a new summary version and its system note, unless another writer got there first.

        `regenerated`: a rewrite the user asked for; a finalised day stays final.
        """
        new_last_id = last_message.id if last_message is not None else segment.last_summarized_message_id
        pending = await self.session.scalar(
            select(func.count())
            .select_from(TranscriptMessage)
            .where(
                TranscriptMessage.day_segment_id == segment.id,
                TranscriptMessage.role != "system",
                TranscriptMessage.id > (new_last_id or 0),
            )
        )
        values: dict[str, Any] = {
            "summary": summary,
            "key_moments": key_moments,
            "last_summarized_message_id": new_last_id,
            "messages_since_summary": int(pending or 0),
            "summary_updated_at": at,
            "summary_due": False,
        }
        if final and not regenerated:
            values.update(status="final", finalized_at=at)
        status_ok = DaySegment.status.in_(("open", "final")) if regenerated else DaySegment.status == "open"
        guard = (
            DaySegment.last_summarized_message_id.is_(None)
            if expected_last_id is None
            else DaySegment.last_summarized_message_id == expected_last_id
        )
        # Optimistic version check: the summary, and so its note, is written once per version.
        result = await self.session.execute(
            update(DaySegment)
            .where(DaySegment.id == segment.id, status_ok, guard)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            return False
        note_at = last_message.sent_at if last_message is not None else at
        note = DAY_SUMMARY_FINAL_NOTE if final else DAY_SUMMARY_NOTE
        self.session.add(
            TranscriptMessage(
                user_id=segment.user_id,
                conversation_id=last_message.conversation_id if last_message is not None else None,
                role="system",
                kind="note",
                content=DAY_SUMMARY_REGENERATED_NOTE if regenerated else note,
                sent_at=note_at,
                day_segment_id=segment.id,
            )
        )
        await self.session.flush()
        return True

    async def finalise_unchanged(self, segment_id: int, at: datetime) -> bool:
        """Close a day whose summary already covers every message (no new version, no note)."""
        result = await self.session.execute(
            update(DaySegment)
            .where(DaySegment.id == segment_id, DaySegment.status == "open")
            .values(status="final", finalized_at=at, summary_due=False)
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def take_due(self, segment_id: int) -> bool:
        """Claim a due in-day summary (clears the flag); only one worker wins."""
        result = await self.session.execute(
            update(DaySegment)
            .where(DaySegment.id == segment_id, DaySegment.summary_due.is_(True), DaySegment.status == "open")
            .values(summary_due=False)
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def due_ids(self, *, limit: int = 500) -> list[int]:
        """Open segments flagged for an in-day summary."""
        stmt = (
            select(DaySegment.id)
            .where(DaySegment.summary_due.is_(True), DaySegment.status == "open")
            .order_by(DaySegment.id)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars())

    async def open_until(self, day: date) -> Sequence[DaySegment]:
        """Open segments of days up to `day` (candidates for the nightly finalisation)."""
        stmt = (
            select(DaySegment)
            .where(DaySegment.status == "open", DaySegment.day <= day)
            .order_by(DaySegment.id)
        )
        return (await self.session.execute(stmt)).scalars().all()

    # --- regeneration requested from the timeline ------------------------------------

    async def day_messages(self, segment: DaySegment, *, limit: int = 5000) -> Sequence[TranscriptMessage]:
        """Every user and assistant message of the day, oldest first (what a rewrite reads)."""
        stmt = (
            select(TranscriptMessage)
            .where(TranscriptMessage.day_segment_id == segment.id, TranscriptMessage.role != "system")
            .order_by(TranscriptMessage.id)
            .limit(limit)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def request_regeneration(self, segment_id: int, at: datetime) -> bool:
        """Ask the day-summaries job to rewrite this day's summary; False when already asked."""
        result = await self.session.execute(
            update(DaySegment)
            .where(DaySegment.id == segment_id, DaySegment.regenerate_requested_at.is_(None))
            .values(regenerate_requested_at=at)
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def regeneration_ids(self, *, limit: int = 500) -> list[int]:
        """Days whose rewrite was asked for, oldest request first."""
        stmt = (
            select(DaySegment.id)
            .where(DaySegment.regenerate_requested_at.is_not(None))
            .order_by(DaySegment.regenerate_requested_at, DaySegment.id)
            .limit(limit)
        )
        return list((await self.session.execute(stmt)).scalars())

    async def take_regeneration(self, segment_id: int) -> bool:
        """Claim a requested rewrite (clears the request); only one worker wins."""
        result = await self.session.execute(
            update(DaySegment)
            .where(DaySegment.id == segment_id, DaySegment.regenerate_requested_at.is_not(None))
            .values(regenerate_requested_at=None)
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]


async def flag_summary_due(
    session: AsyncSession,
    segment: DaySegment,
    *,
    threshold: int,
    token_budget: int,
    count_tokens: Callable[[str], int],
) -> bool:
    """After a turn: mark the day due for an in-day summary (N new messages, or raw text over budget)."""
    if segment.summary_due or segment.status != "open":
        return segment.summary_due
    due = segment.messages_since_summary >= threshold
    if not due:
        texts = (
            await session.execute(
                select(TranscriptMessage.content).where(
                    TranscriptMessage.day_segment_id == segment.id,
                    TranscriptMessage.role != "system",
                    TranscriptMessage.id > (segment.last_summarized_message_id or 0),
                )
            )
        ).scalars()
        due = count_tokens("\n".join(texts)) > token_budget
    if due:
        segment.summary_due = True
    return due


def _unique(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # One statement may not carry the same key twice (PostgreSQL refuses ON CONFLICT on it).
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row["dedupe_key"], row)
    return list(seen.values())
