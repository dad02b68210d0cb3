"""Imports of another assistant's export: the runs, and their conversations stored whole; caller commits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, cast

from sqlalchemy import BindParameter, Table, bindparam, case, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db import work
from db.base import UTCDateTime
from db.models import IMPORTED_DAY, Conversation, DaySegment, ImportRun, TranscriptMessage
from db.models.conversations import IMPORT_WAITING, IMPORTED_KINDS
from db.repositories.facts import mark_changed

# Statuses of a run: read and shown, being stored, done, stopped by an error, stopped by the person.
PREVIEWED, RUNNING, STORED, FAILED, CANCELLED = "previewed", "running", "stored", "failed", "cancelled"


@dataclass(frozen=True)
class KnownConversation:
    """An imported conversation already stored for the person: its row, and how far it reaches."""

    id: int
    last_message_at: datetime
    message_count: int


@dataclass(frozen=True)
class NewLine:
    """One line to store, with the local day it belongs to."""

    role: str
    text: str
    sent_at: datetime
    day: date


class ImportRepository:
    """Import runs and the rows they write."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def known(self, user_id: int) -> dict[str, KnownConversation]:
        """The person's imported conversations by their id in an export."""
        stmt = select(
            Conversation.external_id,
            Conversation.id,
            Conversation.last_message_at,
            Conversation.message_count,
        ).where(
            Conversation.user_id == user_id,
            Conversation.external_id.is_not(None),
            Conversation.kind.in_(IMPORTED_KINDS),
        )
        rows = (await self.session.execute(stmt)).all()
        return {str(row[0]): KnownConversation(row[1], row[2], row[3]) for row in rows}

    async def run_for(self, user_id: int, digest: str) -> ImportRun | None:
        """The person's run of this file, if there is one."""
        stmt = select(ImportRun).where(ImportRun.user_id == user_id, ImportRun.digest == digest)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def claim(self, import_id: int, holder: str, *, now: datetime, lapsed_before: datetime) -> bool:
        """Take the run for this holder: one not running, or running under a lapsed lease (or its own).
        A run another process is taking at this instant is skipped: busy."""
        free = select(ImportRun.id).where(
            ImportRun.id == import_id,
            or_(
                ImportRun.status.in_((PREVIEWED, STORED, FAILED)),
                (ImportRun.status == RUNNING)
                & or_(
                    ImportRun.claimed_by.is_(None),
                    ImportRun.claimed_by == holder,
                    ImportRun.claimed_at < lapsed_before,
                ),
            ),
        )
        values = {
            "status": RUNNING,
            "claimed_by": holder,
            "claimed_at": now,
            "error": None,
            "finished_at": None,
        }
        stmt = work.claim(ImportRun, ImportRun.id, free, values=values, returning=[ImportRun.id])
        return bool((await self.session.execute(stmt)).all())

    async def advance(
        self, import_id: int, holder: str, *, now: datetime, conversations: int, messages: int
    ) -> bool:
        """Count stored work into the run and renew its lease; False when the run is no longer this
        holder's (cancelled, or taken over after the lease lapsed): the caller rolls back and stops."""
        stmt = (
            update(ImportRun)
            .where(ImportRun.id == import_id, ImportRun.status == RUNNING, ImportRun.claimed_by == holder)
            .values(
                claimed_at=now,
                conversations_stored=ImportRun.conversations_stored + conversations,
                messages_stored=ImportRun.messages_stored + messages,
            )
        )
        result = await self.session.execute(stmt)
        return bool(getattr(result, "rowcount", 0))

    async def finish(
        self, import_id: int, holder: str, *, status: str, now: datetime, error: str | None = None
    ) -> bool:
        """End this holder's run with a status (and the error that stopped it)."""
        stmt = (
            update(ImportRun)
            .where(ImportRun.id == import_id, ImportRun.status == RUNNING, ImportRun.claimed_by == holder)
            .values(status=status, finished_at=now, claimed_by=None, claimed_at=None, error=error)
        )
        result = await self.session.execute(stmt)
        return bool(getattr(result, "rowcount", 0))

    async def add_conversation(
        self, *, user_id: int, import_id: int, source: str, external_id: str, lines: Sequence[NewLine]
    ) -> int:
        """A new imported conversation's row, waiting for the import pacer; its id."""
        conversation = Conversation(
            user_id=user_id,
            status=IMPORT_WAITING,
            started_at=lines[0].sent_at,
            last_message_at=lines[-1].sent_at,
            ended_at=lines[-1].sent_at,
            messages=[],
            message_count=len(lines),
            attempts=0,
            kind=source,
            import_id=import_id,
            external_id=external_id,
        )
        self.session.add(conversation)
        await self.session.flush()
        return conversation.id

    async def extend_conversation(self, known: KnownConversation, lines: Sequence[NewLine]) -> None:
        """A stored conversation that grew in a newer export: its new end (the lines are added apart)."""
        stmt = (
            update(Conversation)
            .where(Conversation.id == known.id)
            .values(
                last_message_at=lines[-1].sent_at,
                ended_at=lines[-1].sent_at,
                message_count=Conversation.message_count + len(lines),
            )
        )
        await self.session.execute(stmt)

    async def add_lines(
        self, *, user_id: int, conversation_id: int, lines: Sequence[NewLine], segments: dict[date, int]
    ) -> list[int]:
        """Insert the lines in one statement (role, day segment, kind "imported"); their ids, in order."""
        table = cast(Table, TranscriptMessage.__table__)
        rows: list[dict[str, Any]] = [
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "role": line.role,
                "kind": "imported",
                "content": line.text,
                "telegram_message_id": None,
                "reply_to_id": None,
                "day_segment_id": segments[line.day],
                "sent_at": line.sent_at,
                "speaker_telegram_id": None,
                "speaker_name": None,
            }
            for line in lines
        ]
        # One executemany (RETURNING would make SQLite's driver insert row by row); the conversation is
        # this run's alone, so its newest ids are these lines', in order.
        await self.session.execute(insert(table), rows)
        ids = (
            select(TranscriptMessage.id)
            .where(TranscriptMessage.conversation_id == conversation_id)
            .order_by(TranscriptMessage.id.desc())
            .limit(len(rows))
        )
        return sorted(int(i) for i in (await self.session.execute(ids)).scalars())

    async def open_days(
        self, user_id: int, spans: dict[date, DaySpan], timezone: str, *, today: date
    ) -> dict[date, int]:
        """The ids of the person's day segments of these days, opened where missing (`today`: the
        person's local day now).

        A past day gets a segment of its own in IMPORTED_DAY, so its summary can be written by the
        import's post-processing (jobs/imported.py) and not by the nightly, unpaced; a past day
        already final waits again for the lines it gains; today, and a past day still open with live
        talk, stay open and are summarised with the live talk.
        """
        stmt = select(DaySegment.day, DaySegment.id).where(
            DaySegment.user_id == user_id, DaySegment.day.in_(spans)
        )
        found: dict[date, int] = {row[0]: row[1] for row in (await self.session.execute(stmt)).all()}
        if found:
            reopened = await self.session.execute(
                update(DaySegment)
                .where(
                    DaySegment.id.in_(found.values()), DaySegment.day < today, DaySegment.status == "final"
                )
                .values(status=IMPORTED_DAY)
            )
            if reopened.rowcount:  # type: ignore[attr-defined]
                # Those days' key moments leave the graph's shared history (db/repositories/graph_work.py).
                await mark_changed(self.session, user_id, max(s.last_at for s in spans.values()), facts=False)
        opened = [
            DaySegment(
                user_id=user_id,
                day=day,
                timezone=timezone,
                first_message_at=spans[day].first_at,
                last_message_at=spans[day].last_at,
                message_count=0,
                key_moments=[],
                messages_since_summary=0,
                summary_due=False,
                status=IMPORTED_DAY if day < today else "open",
            )
            for day in sorted(spans)
            if day not in found
        ]
        if opened:
            self.session.add_all(opened)
            await self.session.flush()
            found.update((segment.day, segment.id) for segment in opened)
        return found

    async def count_into_days(self, spans: dict[int, DaySpan]) -> None:
        """Count stored lines into their day segments (by segment id), as a live message is counted."""
        segments = cast(Table, DaySegment.__table__).c
        first_at = bindparam("b_first_at", type_=UTCDateTime())
        last_at = bindparam("b_last_at", type_=UTCDateTime())
        last_id: BindParameter[int] = bindparam("b_last_id")
        # A Core statement run once per day (executemany): the ORM's bulk form wants whole rows.
        stmt = (
            update(cast(Table, DaySegment.__table__))
            .where(segments.id == bindparam("b_id"))
            .values(
                message_count=segments.message_count + bindparam("b_count"),
                messages_since_summary=segments.messages_since_summary + bindparam("b_count"),
                first_message_id=func.coalesce(segments.first_message_id, bindparam("b_first_id")),
                last_message_id=case(
                    (segments.last_message_id > last_id, segments.last_message_id), else_=last_id
                ),
                first_message_at=case(
                    (segments.first_message_at < first_at, segments.first_message_at), else_=first_at
                ),
                last_message_at=case(
                    (segments.last_message_at > last_at, segments.last_message_at), else_=last_at
                ),
            )
        )
        rows = [
            {
                "b_id": segment_id,
                "b_count": span.count,
                "b_first_id": span.first_id,
                "b_last_id": span.last_id,
                "b_first_at": span.first_at,
                "b_last_at": span.last_at,
            }
            for segment_id, span in spans.items()
        ]
        await self.session.execute(stmt, rows)


@dataclass
class DaySpan:
    """A day's lines of one conversation: how many, their first and last time and (once stored) ids."""

    first_at: datetime
    last_at: datetime
    count: int = 0
    first_id: int = 0
    last_id: int = 0

    def add(self, at: datetime) -> None:
        """Count one more line of the day."""
        self.first_at = min(self.first_at, at)
        self.last_at = max(self.last_at, at)
        self.count += 1
