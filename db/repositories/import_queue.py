"""The imported conversations waiting for post-processing, and their way into its queue; caller commits.

An imported conversation is stored as IMPORT_WAITING; the import pacer (jobs/imports.py) moves a few
at a time to QUEUED, where the post-processing queue (jobs/queue.py) claims it like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, distinct, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import (
    IMPORT_WAITING,
    IMPORTED_KINDS,
    QUEUED,
    Conversation,
    ImportRun,
    TranscriptMessage,
    UserFact,
)
from db.repositories.imports import RUNNING, STORED


def _waiting() -> tuple[ColumnElement[bool], ...]:
    # A run still storing its file (RUNNING): its conversations wait until it stops, so a day's
    # summary is written from every line the file brings to that day.
    storing = select(ImportRun.id).where(ImportRun.id == Conversation.import_id, ImportRun.status == RUNNING)
    return (
        Conversation.status == IMPORT_WAITING,
        Conversation.kind.in_(IMPORTED_KINDS),
        or_(Conversation.import_id.is_(None), ~storing.exists()),
    )


@dataclass(frozen=True)
class ImportProgress:
    """How far an import's post-processing got: its conversations by status, and what it learned."""

    statuses: dict[str, int]
    facts: int
    days: int

    @property
    def done(self) -> bool:
        """Every conversation of the import post-processed (or failed for good)."""
        return all(status in ("processed", "failed") for status in self.statuses)


class ImportQueueRepository:
    """Imported conversations between their storing and their post-processing."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def waiting_owners(self, *, limit: int = 1000) -> list[int]:
        """The people with imported conversations waiting (their run is no longer storing)."""
        stmt = select(Conversation.user_id).where(*_waiting()).distinct().order_by(Conversation.user_id)
        return [int(i) for i in (await self.session.scalars(stmt.limit(limit))).all()]

    async def in_flight(self) -> int:
        """Imported conversations queued or being post-processed now (everyone's)."""
        stmt = (
            select(func.count())
            .select_from(Conversation)
            .where(Conversation.kind.in_(IMPORTED_KINDS), Conversation.status.in_((QUEUED, "processing")))
        )
        return int(await self.session.scalar(stmt) or 0)

    async def oldest_waiting(self, user_id: int, limit: int) -> list[int]:
        """The person's waiting imported conversations, oldest first (by their own times)."""
        stmt = (
            select(Conversation.id)
            .where(Conversation.user_id == user_id, *_waiting())
            .order_by(Conversation.started_at, Conversation.id)
            .limit(limit)
        )
        return [int(i) for i in (await self.session.scalars(stmt)).all()]

    async def queue(self, ids: Sequence[int]) -> int:
        """Move these waiting conversations to the post-processing queue; how many moved (a second
        pacer racing this one moves none of them twice)."""
        if not ids:
            return 0
        result = await self.session.execute(
            update(Conversation)
            .where(Conversation.id.in_(list(ids)), Conversation.status == IMPORT_WAITING)
            .values(status=QUEUED, next_attempt_at=None, attempts=0, last_error=None)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    async def progress(self, user_id: int, import_id: int) -> ImportProgress:
        """The person's import: its conversations by status, the facts learned from them (held or
        not) and the days its lines cover (what the last progress message tells)."""
        mine = (Conversation.import_id == import_id, Conversation.user_id == user_id)
        statuses = await self.session.execute(
            select(Conversation.status, func.count()).where(*mine).group_by(Conversation.status)
        )
        facts = (
            select(func.count())
            .select_from(UserFact)
            .join(Conversation, Conversation.id == UserFact.conversation_id)
        )
        days = (
            select(func.count(distinct(TranscriptMessage.day_segment_id)))
            .select_from(TranscriptMessage)
            .join(Conversation, Conversation.id == TranscriptMessage.conversation_id)
        )
        return ImportProgress(
            {str(status): int(count) for status, count in statuses.all()},
            int(await self.session.scalar(facts.where(*mine, UserFact.user_id == user_id)) or 0),
            int(await self.session.scalar(days.where(*mine)) or 0),
        )

    async def learned_runs(self, limit: int = 20) -> list[ImportRun]:
        """Stored runs whose conversations are all post-processed (or failed for good) and whose
        person has not been told yet what they taught the bot."""
        busy = select(Conversation.id).where(
            Conversation.import_id == ImportRun.id, Conversation.status.not_in(("processed", "failed"))
        )
        stmt = (
            select(ImportRun)
            .where(ImportRun.status == STORED, ImportRun.learned_at.is_(None), ~busy.exists())
            .order_by(ImportRun.id)
            .limit(limit)
        )
        return list((await self.session.scalars(stmt)).all())

    async def mark_learned(self, import_id: int, *, now: datetime) -> bool:
        """Take the telling of this run (once: a second pacer racing this one gets False)."""
        result = await self.session.execute(
            update(ImportRun)
            .where(ImportRun.id == import_id, ImportRun.learned_at.is_(None))
            .values(learned_at=now)
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(result, "rowcount", 0))

    async def waiting_count(self, user_id: int | None = None) -> int:
        """Imported conversations still waiting (one person's, or everyone's)."""
        stmt = select(func.count()).select_from(Conversation).where(*_waiting())
        if user_id is not None:
            stmt = stmt.where(Conversation.user_id == user_id)
        return int(await self.session.scalar(stmt) or 0)
