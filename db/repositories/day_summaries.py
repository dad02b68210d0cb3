"""Day summaries: a day's unsummarised messages, its summary stored exactly once per version, and
the flags that ask for one; the caller owns the transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import IMPORTED_DAY, DaySegment, TranscriptMessage
from db.repositories.facts import mark_changed

# The most lines one new summary version folds in (the rest wait for the next).
FOLD_LINES = 2000
DAY_SUMMARY_NOTE = "day summary updated"
DAY_SUMMARY_FINAL_NOTE = "day summary finalised"
DAY_SUMMARY_REGENERATED_NOTE = "day summary regenerated"


class DaySummaryRepository:
    """Reading a day's unsummarised messages and storing its summary exactly once per version."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, segment_id: int) -> DaySegment | None:
        """A day segment by id."""
        return await self.session.get(DaySegment, segment_id)

    async def unsummarised(
        self, segment: DaySegment, *, limit: int = FOLD_LINES
    ) -> Sequence[TranscriptMessage]:
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
        status_ok = DaySegment.status.in_(
            ("open", "final", IMPORTED_DAY) if regenerated else ("open", IMPORTED_DAY)
        )
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
        if final or regenerated:  # a final day's key moments are the graph's relationship group
            await mark_changed(self.session, segment.user_id, at, facts=False)
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
        user_id = await self.session.scalar(
            update(DaySegment)
            .where(DaySegment.id == segment_id, DaySegment.status.in_(("open", IMPORTED_DAY)))
            .values(status="final", finalized_at=at, summary_due=False)
            .returning(DaySegment.user_id)
            .execution_options(synchronize_session=False)
        )
        if user_id is not None:
            await mark_changed(self.session, user_id, at, facts=False)
        return user_id is not None

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
