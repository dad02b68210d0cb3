"""The post-processing queue: claiming conversations (db/work.py), retries with backoff, requeue and stats.

A conversation enters the queue when it ends: `ConversationRepository.end_and_queue` and
`end_idle_and_queue` (db/repositories/conversations.py) set its status to `QUEUED`. That way in
lives in `db/` because the turn ends conversations and the agent never imports `jobs/`; everything after
it is here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, String, Update, and_, bindparam, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import aliased

from agent.digest.extraction import Extraction, OpenThread, ShownThought
from agent.digest.summaries import Line
from agent.memory.profile import ProfileFact
from db import work
from db.models import QUEUED, Conversation, DaySegment, User, UTCDateTime
from db.work import Retry

_ERROR_CHARS = 2000


@dataclass(frozen=True)
class Ingested:
    """A claimed conversation as post-processing's stage 1 read it (jobs/pipeline.py): its messages, its
    days and the user's open threads."""

    conversation_id: int
    user_id: int
    ended_at: datetime
    lines: list[Line]
    segment_ids: list[int]
    open_threads: list[OpenThread]
    stored_extraction: Extraction | None
    # The persona's thoughts the context showed while it ran (the extractor says which were shared).
    thoughts: list[ShownThought] = field(default_factory=list)
    # The user's zone: the extraction's follow-up times are local times there.
    timezone: str = "UTC"
    # The owner is a group chat: its prompts speak of members by name (agent/digest/groups.py).
    group: bool = False
    # The owner's held facts (profile order), for the extraction to decide against, and their language.
    known: Sequence[ProfileFact] = ()
    language: str | None = None
    kind: str = "text"  # the conversation's: an imported one has stages of its own (jobs/imported.py)


@dataclass(frozen=True)
class QueueStats:
    """Queue depth and outcomes, for `/jobs`."""

    active: int
    queued: int
    processing: int
    failed: int
    processed: int
    day_summaries_due: int

    def format(self) -> str:
        """A short plain-text report."""
        return (
            f"post-processing queue\n"
            f"  queued (closed): {self.queued}\n"
            f"  processing: {self.processing}\n"
            f"  failed: {self.failed}\n"
            f"  processed: {self.processed}\n"
            f"  active sessions: {self.active}\n"
            f"day summaries due: {self.day_summaries_due}"
        )


def _claimable(
    conversation: type[Conversation], now: ColumnElement[datetime], stale_before: ColumnElement[datetime]
) -> ColumnElement[bool]:
    ready = and_(
        conversation.status == QUEUED,
        or_(conversation.next_attempt_at.is_(None), conversation.next_attempt_at <= now),
    )
    # A claim this old belongs to a worker that died; it is taken over (and counts as an attempt).
    stale = and_(conversation.status == "processing", conversation.claimed_at < stale_before)
    return and_(or_(ready, stale), ~_held_back(conversation, stale_before))


def _held_back(
    conversation: type[Conversation], stale_before: ColumnElement[datetime]
) -> ColumnElement[bool]:
    """True while another conversation of the same user must go first or is being processed.

    An older conversation still queued (due or waiting for its retry) or processing goes first, so a
    user's conversations are processed one at a time, oldest first (by `ended_at`, then id); a live
    claim on a newer one (a requeued older conversation) is waited for too. `processed` and `failed`
    release the next one.
    """
    other = aliased(Conversation, name="other_conversation")
    older = or_(
        other.ended_at < conversation.ended_at,
        and_(other.ended_at == conversation.ended_at, other.id < conversation.id),
    )
    live_claim = and_(other.status == "processing", other.claimed_at >= stale_before)
    return exists().where(
        other.user_id == conversation.user_id,
        other.id != conversation.id,
        or_(and_(other.status.in_((QUEUED, "processing")), older), live_claim),
    )


def _claim_statement(dialect: str) -> Update:
    """The one-statement claim for a dialect, built once (bound: now, stale_before, holder)."""
    now = bindparam("now", type_=UTCDateTime())
    stale_before = bindparam("stale_before", type_=UTCDateTime())
    candidate = aliased(Conversation, name="candidate")
    picked = (
        select(candidate.id)
        .where(_claimable(candidate, now, stale_before))
        .order_by(candidate.ended_at, candidate.id)
        .limit(1)
    )
    lock: list[Any] | None = None
    if dialect == "postgresql":
        # Its snapshot predates claims that other workers have not committed yet, so the
        # candidate's user row is locked too (FOR NO KEY UPDATE, which turns' reads and
        # foreign-key checks do not wait for): a user another worker is claiming right now is
        # skipped, never claimed twice. Rows are locked in order, so only the chosen one is.
        picked = picked.join(User, User.id == candidate.user_id)
        lock = [candidate, User]
    values = {
        Conversation.status: "processing",
        Conversation.claimed_at: now,
        Conversation.claimed_by: bindparam("holder", type_=String()),
        Conversation.attempts: Conversation.attempts + 1,
    }
    return work.claim(
        Conversation,
        Conversation.id,
        picked,
        values=values,
        returning=[Conversation.id],
        lock=lock,
        key_share=True,
    )


# Built on first use per dialect: composing the statement (aliases, correlated EXISTS) costs more
# Python time than running it, and the claim runs once per conversation.
_CLAIMS: dict[str, Update] = {}


async def claim_and_read[T](
    sessions: async_sessionmaker[AsyncSession],
    holder: str,
    now: datetime,
    claim_timeout: timedelta,
    read: Callable[[AsyncSession, int], Awaitable[T]],
) -> tuple[int, T] | None:
    """Claim one due conversation for `holder` (status processing, attempts + 1), then
    `read(session, conversation_id)` before the claim commits; None when idle.

    Only the oldest unfinished conversation of a user is claimable, and only while none of that
    user's conversations is claimed by a live worker. One statement on both databases.

    One transaction for the claim and the pipeline's first reads. The claim's locks
    are held while they run (on PostgreSQL the conversation and user rows, on SQLite the write
    lock), so `read` should be a few quick reads and raise nothing but database errors.
    """
    async with sessions() as session, session.begin():
        claimed_id = await _claim(session, holder, now, claim_timeout)
        if claimed_id is None:
            return None
        return claimed_id, await read(session, claimed_id)


async def _claim(session: AsyncSession, holder: str, now: datetime, claim_timeout: timedelta) -> int | None:
    dialect = session.get_bind().dialect.name
    stmt = _CLAIMS.get(dialect)
    if stmt is None:
        stmt = _CLAIMS[dialect] = _claim_statement(dialect)
    claimed_id: int | None = await session.scalar(
        stmt, {"now": now, "stale_before": now - claim_timeout, "holder": holder}
    )
    return claimed_id


async def record_failure(
    sessions: async_sessionmaker[AsyncSession],
    conversation_id: int,
    holder: str,
    error: str,
    now: datetime,
    *,
    retry: Retry,
) -> str | None:
    """Put a failed conversation back with backoff, or mark it `failed` after the last attempt."""
    async with sessions() as session, session.begin():
        conversation = await session.get(Conversation, conversation_id)
        if conversation is None or conversation.claimed_by != holder or conversation.status != "processing":
            return None  # deleted, or taken over by another worker meanwhile
        conversation.last_error = error[:_ERROR_CHARS]
        conversation.claimed_by = None
        if retry.last(conversation.attempts):
            conversation.status = "failed"
            conversation.next_attempt_at = None
        else:
            conversation.status = QUEUED
            conversation.next_attempt_at = now + retry.after(conversation.attempts)
        return conversation.status


async def requeue(sessions: async_sessionmaker[AsyncSession], conversation_id: int, now: datetime) -> bool:
    """Queue one closed, failed or processed conversation again, due now (`/reprocess`, the CLI)."""
    async with sessions() as session, session.begin():
        result = await session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id, Conversation.status != "active")
            .values(
                status=QUEUED,
                next_attempt_at=now,
                attempts=0,
                claimed_at=None,
                claimed_by=None,
                last_error=None,
                processed_at=None,
            )
            .execution_options(synchronize_session=False)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]


async def queue_stats(sessions: async_sessionmaker[AsyncSession]) -> QueueStats:
    """Counts per conversation status and day segments waiting for an in-day summary."""
    async with sessions() as session:
        rows = await session.execute(select(Conversation.status, func.count()).group_by(Conversation.status))
        counts: dict[str, int] = {status: int(count) for status, count in rows}
        due = await session.scalar(
            select(func.count())
            .select_from(DaySegment)
            .where(DaySegment.summary_due.is_(True), DaySegment.status == "open")
        )
    return QueueStats(
        active=counts.get("active", 0),
        queued=counts.get(QUEUED, 0),
        processing=counts.get("processing", 0),
        failed=counts.get("failed", 0),
        processed=counts.get("processed", 0),
        day_summaries_due=int(due or 0),
    )


async def mark_processed(
    session: AsyncSession,
    conversation_id: int,
    holder: str,
    now: datetime,
    *,
    summary: str | None,
    tone: str | None,
) -> bool:
    """Finalise a conversation `holder` still holds (a slow worker may have been taken over)."""
    values: dict[str, object] = {
        "status": "processed",
        "processed_at": now,
        "next_attempt_at": None,
        "last_error": None,
    }
    if summary is not None:
        values.update(summary=summary, tone=tone)
    # claimed_by stays: it names the worker that processed the conversation.
    result = await session.execute(
        update(Conversation)
        .where(
            Conversation.id == conversation_id,
            Conversation.status == "processing",
            Conversation.claimed_by == holder,
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
